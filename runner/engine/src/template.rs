//! Templates in pipeline values (`{{ vars.pool }}`, `{{ matrix.bs }}`,
//! `{{ stages.pool.outputs.name }}`), rendered by minijinja in strict mode: an
//! undefined name is an error, never an empty string.

use std::collections::HashSet;

use minijinja::{Environment, UndefinedBehavior, Value};

/// A template that does not parse or render: a syntax error, an undefined
/// name (strict mode), a failing filter. Displays minijinja's message without
/// its debug dump.
#[derive(Debug)]
pub struct TemplateError(pub minijinja::Error);

impl From<minijinja::Error> for TemplateError {
    fn from(e: minijinja::Error) -> Self {
        TemplateError(e)
    }
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = &self.0;
        match e.detail() {
            Some(detail) => f.write_str(detail),
            None if e.kind() == minijinja::ErrorKind::UndefinedError => {
                f.write_str("undefined value")
            }
            None => write!(f, "{}", e.kind()),
        }
    }
}

impl std::error::Error for TemplateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Whether a string holds template syntax.
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%")
}

/// The one template environment. Auto-escaping is off: values become command
/// arguments and file names, not HTML.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env
}

/// A template context from any serializable value (usually a `json!` object).
pub fn context(value: impl serde::Serialize) -> Value {
    Value::from(minijinja::value::Serde(value))
}

/// Names a template or expression reads, as dotted paths (`vars.pool`).
pub fn referenced_names(
    env: &Environment<'_>,
    text: &str,
    is_expression: bool,
) -> Result<HashSet<String>, TemplateError> {
    Ok(if is_expression {
        env.compile_expression(text)?.undeclared_variables(true)
    } else {
        env.template_from_str(text)?.undeclared_variables(true)
    })
}

/// The most one rendered value may hold: values become command arguments
/// (Linux refuses an argument over 128 KiB) and file names, so a template
/// rendering to more is a mistake, and is stopped as it writes rather than
/// after it has filled memory.
pub const MAX_RENDERED_BYTES: usize = 1 << 20;

pub fn render(env: &Environment<'_>, text: &str, ctx: &Value) -> Result<String, TemplateError> {
    if !is_template(text) {
        return Ok(text.to_string());
    }
    let template = env.template_from_str(text)?;
    let mut out = Bounded::default();
    match template.render_captured_to(ctx.clone(), &mut out) {
        Ok(_) => Ok(String::from_utf8_lossy(&out.bytes).into_owned()),
        Err(_) if out.overflowed => Err(TemplateError(minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!(
                "renders to more than {} MiB, the limit of one rendered value (a loop or repetition that runs away?)",
                MAX_RENDERED_BYTES >> 20
            ),
        ))),
        Err(e) => Err(e.into()),
    }
}

/// A buffer that refuses to grow past [`MAX_RENDERED_BYTES`].
#[derive(Default)]
struct Bounded {
    bytes: Vec<u8>,
    overflowed: bool,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > MAX_RENDERED_BYTES {
            self.overflowed = true;
            return Err(std::io::Error::other("rendered value too long"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A filter or test a template names that does not exist (an unknown
/// function is an undefined name, reported by the name check), found
/// before anything runs: the template is rendered once with every name
/// defined as an empty value (chainable undefined) and a small fuel budget,
/// so a loop cannot run away. Other failures (a filter that rejects the
/// empty value) are not this check's business: the real run reports them.
pub fn unknown_callable(text: &str, is_expression: bool) -> Option<String> {
    let mut env = environment();
    env.set_undefined_behavior(UndefinedBehavior::Chainable);
    env.set_fuel(Some(100_000));
    let result = if is_expression {
        env.compile_expression(strip_braces(text))
            .and_then(|e| e.eval(Value::UNDEFINED).map(|_| ()))
    } else {
        env.template_from_str(text).and_then(|t| {
            t.render_captured_to(Value::UNDEFINED, Bounded::default())
                .map(|_| ())
        })
    };
    match result {
        Err(e)
            if matches!(
                e.kind(),
                minijinja::ErrorKind::UnknownFilter | minijinja::ErrorKind::UnknownTest
            ) =>
        {
            Some(TemplateError(e).to_string())
        }
        _ => None,
    }
}

pub fn eval_bool(env: &Environment<'_>, expr: &str, ctx: &Value) -> Result<bool, TemplateError> {
    let expr = strip_braces(expr);
    Ok(env.compile_expression(expr)?.eval(ctx)?.is_true())
}

/// `when: "{{ x }}"` and `when: x` mean the same.
pub fn strip_braces(expr: &str) -> &str {
    let t = expr.trim();
    t.strip_prefix("{{")
        .and_then(|t| t.strip_suffix("}}"))
        .map_or(t, str::trim)
}

/// Renders every string inside a JSON value.
pub fn render_json(
    env: &Environment<'_>,
    value: &serde_json::Value,
    ctx: &Value,
) -> Result<serde_json::Value, TemplateError> {
    use serde_json::Value as J;
    Ok(match value {
        J::String(s) => J::String(render(env, s, ctx)?),
        J::Array(items) => J::Array(
            items
                .iter()
                .map(|v| render_json(env, v, ctx))
                .collect::<Result<_, _>>()?,
        ),
        J::Object(map) => J::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), render_json(env, v, ctx)?)))
                .collect::<Result<_, TemplateError>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runaway_template_stops_at_the_limit_with_a_clear_error() {
        let env = environment();
        let ctx = context(serde_json::json!({}));
        let e = render(&env, "{% for i in range(10000) %}{% for j in range(10000) %}xxxxxxxxxx{% endfor %}{% endfor %}", &ctx)
            .unwrap_err();
        assert!(
            e.to_string().starts_with("renders to more than 1 MiB"),
            "{e}"
        );
        let ok = render(&env, "{% for i in range(1000) %}x{% endfor %}", &ctx).unwrap();
        assert_eq!(ok.len(), 1000);
    }

    #[test]
    fn strict_undefined_is_an_error() {
        let env = environment();
        let ctx = minijinja::context! { vars => minijinja::context!{ a => 1 } };
        assert_eq!(render(&env, "x{{ vars.a }}", &ctx).unwrap(), "x1");
        let e = render(&env, "{{ vars.b }}", &ctx).unwrap_err();
        assert_eq!(e.0.kind(), minijinja::ErrorKind::UndefinedError);
    }

    #[test]
    fn finds_names() {
        let env = environment();
        let names =
            referenced_names(&env, "{{ vars.a }}-{{ stages.p.outputs.name }}", false).unwrap();
        assert!(names.contains("vars.a"));
        assert!(names.contains("stages.p.outputs.name"));
        assert!(eval_bool(&env, "{{ 1 > 0 }}", &Value::UNDEFINED).unwrap());
    }
}
