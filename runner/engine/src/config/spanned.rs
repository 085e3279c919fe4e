//! `Sp<T>`: a typed value with its place in the pipeline file. A thin wrapper
//! over serde-saphyr's `Spanned` that also describes itself to schemars, so
//! the JSON Schema shows plain `T`.

use std::ops::Deref;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::diagnostic::Loc;

#[derive(Debug, Clone, PartialEq)]
pub struct Sp<T> {
    pub value: T,
    pub loc: Loc,
}

impl<T> Sp<T> {
    pub fn new(value: T, loc: Loc) -> Self {
        Sp { value, loc }
    }
}

impl<T> Deref for Sp<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Sp<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = serde_saphyr::Spanned::<T>::deserialize(d)?;
        let loc = Loc::new(s.referenced.line() as u32, s.referenced.column() as u32);
        Ok(Sp::new(s.value, loc))
    }
}

impl<T: Serialize> Serialize for Sp<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

impl<T: JsonSchema> JsonSchema for Sp<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn inline_schema() -> bool {
        T::inline_schema()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}
