//! PATCH requests (RFC 7644 §3.5.2): a list of `add`, `remove` and `replace` operations, each with
//! an optional path. Providers spell the operation in any case (Entra sends `Replace`) and send
//! booleans as strings (`"False"`); both are accepted.

use serde_json::Value;

use super::{MAX_OPERATIONS, PATCH_SCHEMA, ScimError, ScimResult};

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// Add (to a multi-valued attribute) or set.
    Add,
    /// Remove.
    Remove,
    /// Set.
    Replace,
}

/// One operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// add, remove or replace.
    pub kind: OpKind,
    /// The attribute path, lower-cased outside quoted values; none means the value is an object
    /// of attributes.
    pub path: Option<String>,
    /// The value, when one was sent.
    pub value: Option<Value>,
}

/// Parses a PATCH body.
pub fn parse(body: &Value) -> ScimResult<Vec<Op>> {
    let schemas = body.get("schemas").and_then(Value::as_array);
    if !schemas.is_some_and(|s| s.iter().any(|x| x.as_str() == Some(PATCH_SCHEMA))) {
        return Err(ScimError::bad(
            "invalidSyntax",
            format!("A PATCH body names the schema {PATCH_SCHEMA}."),
        ));
    }
    let ops = body
        .get("Operations")
        .or_else(|| body.get("operations"))
        .and_then(Value::as_array)
        .ok_or_else(|| ScimError::bad("invalidSyntax", "A PATCH body has a list of Operations."))?;
    if ops.len() > MAX_OPERATIONS {
        return Err(ScimError::bad("tooMany", format!("A PATCH holds at most {MAX_OPERATIONS} operations.")));
    }
    ops.iter()
        .map(|op| {
            let kind = match op.get("op").and_then(Value::as_str).map(str::to_ascii_lowercase).as_deref() {
                Some("add") => OpKind::Add,
                Some("remove") => OpKind::Remove,
                Some("replace") => OpKind::Replace,
                _ => {
                    return Err(ScimError::bad(
                        "invalidSyntax",
                        "Each operation's op is add, remove or replace.",
                    ));
                }
            };
            let path = match op.get("path") {
                None | Some(Value::Null) => None,
                Some(Value::String(p)) if !p.trim().is_empty() => Some(normalize_path(p.trim())),
                Some(_) => return Err(ScimError::bad("invalidPath", "A path is a non-empty string.")),
            };
            let value = op.get("value").cloned();
            if kind != OpKind::Remove && value.is_none() {
                return Err(ScimError::bad("invalidValue", "add and replace need a value."));
            }
            if kind == OpKind::Remove && path.is_none() {
                return Err(ScimError::bad("noTarget", "remove needs a path."));
            }
            Ok(Op { kind, path, value })
        })
        .collect()
}

/// Lower-cases a path's attribute names, keeping quoted values as they are.
fn normalize_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut quoted = false;
    for c in p.chars() {
        if c == '"' {
            quoted = !quoted;
        }
        if quoted { out.push(c) } else { out.extend(c.to_lowercase()) }
    }
    out
}

/// A boolean as providers send it: `true`, or `"True"`.
pub fn boolean(v: &Value) -> ScimResult<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        _ => Err(ScimError::bad("invalidValue", "active is true or false.")),
    }
}

/// A string value (or, for providers that wrap single values, a one-element list of one).
pub fn string(v: &Value, what: &str) -> ScimResult<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Array(a) if a.len() == 1 => string(&a[0], what),
        Value::Object(o) if o.contains_key("value") => string(&o["value"], what),
        _ => Err(ScimError::bad("invalidValue", format!("{what} must be a string."))),
    }
}

/// The id in a `members[value eq "…"]` path, if the path is one.
pub fn member_filter(path: &str) -> Option<String> {
    let inner = path.strip_prefix("members[")?.strip_suffix(']')?;
    let (attr, rest) = inner.trim().split_once(char::is_whitespace)?;
    let (op, value) = rest.trim().split_once(char::is_whitespace)?;
    (attr == "value" && op == "eq").then(|| serde_json::from_str::<String>(value.trim()).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn operations_in_any_case_with_paths_lowered_but_values_kept() {
        let body = json!({"schemas": [PATCH_SCHEMA], "Operations": [
            {"op": "Replace", "path": "displayName", "value": "X"},
            {"op": "remove", "path": "members[value eq \"AbC\"]"},
        ]});
        let ops = parse(&body).unwrap();
        assert_eq!(ops[0].kind, OpKind::Replace);
        assert_eq!(ops[0].path.as_deref(), Some("displayname"));
        assert_eq!(member_filter(ops[1].path.as_deref().unwrap()).as_deref(), Some("AbC"));
        assert!(boolean(&json!("False")).is_ok_and(|b| !b));
    }

    #[test]
    fn malformed_patches_say_what_is_wrong() {
        for (body, kind) in [
            (json!({"Operations": []}), "invalidSyntax"),
            (json!({"schemas": [PATCH_SCHEMA]}), "invalidSyntax"),
            (json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "move"}]}), "invalidSyntax"),
            (json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "remove"}]}), "noTarget"),
            (json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "add", "path": "x"}]}), "invalidValue"),
            (
                json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "add", "path": 3, "value": 1}]}),
                "invalidPath",
            ),
        ] {
            assert_eq!(parse(&body).unwrap_err().scim_type, Some(kind), "{body}");
        }
    }
}
