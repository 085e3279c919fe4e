//! Templates in pipeline values (`{{ vars.pool }}`, `{{ matrix.bs }}`,
//! `{{ stages.pool.outputs.name }}`), rendered by minijinja in strict mode: an
//! undefined name is an error, never an empty string.

use std::collections::HashSet;

use minijinja::{Environment, UndefinedBehavior, Value};

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
) -> Result<HashSet<String>, String> {
    if is_expression {
        env.compile_expression(text)
            .map(|e| e.undeclared_variables(true))
            .map_err(describe_error)
    } else {
        env.template_from_str(text)
            .map(|t| t.undeclared_variables(true))
            .map_err(describe_error)
    }
}

pub fn render(env: &Environment<'_>, text: &str, ctx: &Value) -> Result<String, String> {
    if !is_template(text) {
        return Ok(text.to_string());
    }
    env.render_str(text, ctx).map_err(describe_error)
}

pub fn eval_bool(env: &Environment<'_>, expr: &str, ctx: &Value) -> Result<bool, String> {
    let expr = strip_braces(expr);
    env.compile_expression(expr)
        .and_then(|e| e.eval(ctx))
        .map(|v| v.is_true())
        .map_err(describe_error)
}

/// `when: "{{ x }}"` and `when: x` mean the same.
pub fn strip_braces(expr: &str) -> &str {
    let t = expr.trim();
    t.strip_prefix("{{")
        .and_then(|t| t.strip_suffix("}}"))
        .map_or(t, str::trim)
}

/// minijinja's message without its debug dump.
pub fn describe_error(e: minijinja::Error) -> String {
    let mut msg = e
        .detail()
        .map_or_else(|| e.kind().to_string(), str::to_string);
    if e.kind() == minijinja::ErrorKind::UndefinedError && e.detail().is_none() {
        msg = "undefined value".into();
    }
    msg
}

/// Renders every string inside a JSON value.
pub fn render_json(
    env: &Environment<'_>,
    value: &serde_json::Value,
    ctx: &Value,
) -> Result<serde_json::Value, String> {
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
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_undefined_is_an_error() {
        let env = environment();
        let ctx = minijinja::context! { vars => minijinja::context!{ a => 1 } };
        assert_eq!(render(&env, "x{{ vars.a }}", &ctx).unwrap(), "x1");
        assert!(render(&env, "{{ vars.b }}", &ctx).is_err());
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
