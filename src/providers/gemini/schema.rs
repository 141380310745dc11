//! Tool schemas for Gemini: JSON Schema rewritten into the OpenAPI-3.0 subset that
//! `FunctionDeclaration.parameters` accepts.

use serde_json::{Map, Value};

/// Keys of Gemini's `Schema` object that [`sanitize_schema`] keeps.
const SCHEMA_PASSTHROUGH_KEYS: &[&str] = &[
    "title",
    "description",
    "pattern",
    "example",
    "default",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "minimum",
    "maximum",
];

/// `format` values the Gemini API accepts (`enum`, `date-time` for strings; numeric widths).
const SCHEMA_FORMATS: &[&str] = &["enum", "date-time", "float", "double", "int32", "int64"];

/// Deepest schema nesting (and `$ref` chain) followed before cutting off with `{}`.
const MAX_SCHEMA_DEPTH: usize = 32;

/// Most schema nodes one [`sanitize_schema`] run produces (later ones become `{}`).
const MAX_SCHEMA_NODES: usize = 10_000;

/// Rewrites a JSON Schema into the OpenAPI-3.0 subset Gemini's `Schema` accepts.
///
/// * Kept: `type`, `format` (only `enum`, `date-time`, `float`, `double`, `int32`, `int64`; the
///   Gemini API rejects others such as `uri` or `email`), `title`, `description`, `nullable`,
///   `enum`, `properties`, `required` (only names present in `properties`), `propertyOrdering`,
///   `items`, `anyOf`, `minItems`, `maxItems`, `minLength`, `maxLength`, `minProperties`,
///   `maxProperties`, `minimum`, `maximum`, `pattern`, `example`, `default`.
/// * Converted: local `$ref`s (`#/$defs/...`, `#/definitions/...`) are inlined (a recursive
///   reference is cut to `{"type": "object"}`, unresolvable ones are dropped); `allOf` is merged
///   into one schema; `oneOf` becomes `anyOf`; a `null` member of `type: [...]`,
///   `anyOf`/`oneOf` or `enum` becomes `nullable: true`; a remaining
///   single `anyOf` member is inlined; several types become `anyOf`; `const` becomes a one-value
///   `enum`; `enum` values become strings (Gemini's `enum` is `string[]`, and only allowed on
///   strings: an `enum` on a number, integer or boolean is dropped and its values are appended to
///   the `description` instead, so the argument keeps its type); an untyped `enum` gets `string`,
///   untyped `properties` (`items`) get `object` (`array`); boolean schemas become `{}`.
/// * Dropped: everything else, notably `$schema`, `$id`, `$defs`, `definitions`, `$comment`,
///   `additionalProperties`, `patternProperties`, `unevaluatedProperties`, `propertyNames`,
///   `dependentRequired`, `if`/`then`/`else`, `not`, `const` (after conversion),
///   `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `uniqueItems`, `contains`,
///   `prefixItems`, `examples`, `readOnly`, `writeOnly`, `deprecated`, `contentEncoding`,
///   `contentMediaType`, and unsupported `format`s.
pub fn sanitize_schema(schema: &Value) -> Value {
    let empty = Map::new();
    let root = schema.as_object().unwrap_or(&empty);
    let mut defs = Map::new();
    for key in ["definitions", "$defs"] {
        if let Some(map) = root.get(key).and_then(Value::as_object) {
            defs.extend(map.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut ctx = SchemaCtx { defs: &defs, active: Vec::new(), budget: MAX_SCHEMA_NODES };
    Value::Object(ctx.sanitize(schema, 0))
}

/// State of one [`sanitize_schema`] run.
struct SchemaCtx<'a> {
    /// `$defs` / `definitions` of the root schema.
    defs: &'a Map<String, Value>,
    /// `$ref` targets being expanded on the current path (a repeat is a cycle).
    active: Vec<String>,
    /// Nodes still allowed, against exponential `$ref` fan-out.
    budget: usize,
}

impl SchemaCtx<'_> {
    /// Inlines `$ref` and `allOf` of one node (not of its children); returns the node and the
    /// names of the definitions it expanded.
    fn flatten(&mut self, node: &Value, depth: usize) -> (Map<String, Value>, Vec<String>) {
        let mut expanded = Vec::new();
        let Some(obj) = node.as_object() else { return (Map::new(), expanded) };
        if depth > MAX_SCHEMA_DEPTH {
            return (Map::new(), expanded);
        }
        let mut out = obj.clone();
        if let Some(reference) = out.remove("$ref") {
            let name = reference.as_str().and_then(ref_name);
            let target = name.as_ref().and_then(|n| self.defs.get(n).map(|t| (n.clone(), t)));
            match target {
                Some((name, _)) if self.active.contains(&name) || expanded.contains(&name) => {
                    // A recursive definition: cut here (recursive types are objects in practice).
                    out.entry("type").or_insert_with(|| Value::from("object"));
                }
                Some((name, target)) => {
                    expanded.push(name.clone());
                    self.active.push(name);
                    let (inner, inner_expanded) = self.flatten(target, depth + 1);
                    self.active.pop();
                    expanded.extend(inner_expanded);
                    merge_schema(&mut out, inner);
                }
                None => {}
            }
        }
        if let Some(Value::Array(members)) = out.remove("allOf") {
            for member in &members {
                self.active.extend(expanded.iter().cloned());
                let (inner, inner_expanded) = self.flatten(member, depth + 1);
                self.active.truncate(self.active.len().saturating_sub(expanded.len()));
                expanded.extend(inner_expanded);
                merge_schema(&mut out, inner);
            }
        }
        (out, expanded)
    }

    /// Sanitizes one schema node and, recursively, its children.
    fn sanitize(&mut self, node: &Value, depth: usize) -> Map<String, Value> {
        if depth > MAX_SCHEMA_DEPTH || self.budget == 0 {
            return Map::new();
        }
        self.budget -= 1;
        let (src, expanded) = self.flatten(node, depth);
        let pushed = expanded.len();
        self.active.extend(expanded);
        let out = self.sanitize_flat(&src, depth);
        self.active.truncate(self.active.len().saturating_sub(pushed));
        out
    }

    /// [`Self::sanitize`] of a node whose `$ref` / `allOf` are already inlined.
    fn sanitize_flat(&mut self, src: &Map<String, Value>, depth: usize) -> Map<String, Value> {
        let mut out = Map::new();
        let mut nullable = src.get("nullable").and_then(Value::as_bool) == Some(true);

        let mut types: Vec<String> = match src.get("type") {
            Some(Value::String(t)) => vec![t.clone()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            _ => Vec::new(),
        };
        if types.iter().any(|t| t == "null") {
            nullable = true;
            types.retain(|t| t != "null");
        }

        let mut any_of = Vec::new();
        for key in ["anyOf", "oneOf"] {
            for member in src.get(key).and_then(Value::as_array).into_iter().flatten() {
                let member = self.sanitize(member, depth + 1);
                // `{"type": "null"}` comes out as `{"nullable": true}`: the whole union is nullable.
                if member.len() == 1 && member.get("nullable") == Some(&Value::Bool(true)) {
                    nullable = true;
                } else {
                    any_of.push(member);
                }
            }
        }

        match types.len() {
            0 => {}
            1 => {
                out.insert("type".into(), Value::String(types.remove(0)));
            }
            _ if any_of.is_empty() => {
                any_of = types
                    .into_iter()
                    .map(|t| Map::from_iter([("type".to_string(), Value::String(t))]))
                    .collect();
            }
            _ => {}
        }

        if let Some(format) = src.get("format").and_then(Value::as_str).filter(|f| SCHEMA_FORMATS.contains(f))
        {
            out.insert("format".into(), Value::from(format));
        }

        let mut enum_note = None;
        let enum_source = match (src.get("enum"), src.get("const")) {
            (Some(Value::Array(values)), _) => Some(values.clone()),
            (None, Some(value)) => Some(vec![value.clone()]),
            _ => None,
        };
        if let Some(values) = enum_source {
            let mut strings = Vec::new();
            for value in values {
                match value {
                    Value::Null => nullable = true,
                    Value::String(s) => strings.push(Value::String(s)),
                    Value::Bool(_) | Value::Number(_) => strings.push(Value::String(value.to_string())),
                    Value::Array(_) | Value::Object(_) => {}
                }
            }
            let declared = out.get("type").and_then(Value::as_str);
            if !strings.is_empty() && matches!(declared, None | Some("string")) {
                out.insert("enum".into(), Value::Array(strings));
                out.entry("type").or_insert_with(|| Value::from("string"));
            } else if !strings.is_empty() {
                // Gemini only takes `enum` on strings: keep the type, say the values in words.
                let listed: Vec<&str> = strings.iter().filter_map(Value::as_str).collect();
                enum_note = Some(format!("One of: {}.", listed.join(", ")));
            }
        }

        if let Some(props) = src.get("properties").and_then(Value::as_object) {
            let props: Map<String, Value> = props
                .iter()
                .map(|(name, p)| (name.clone(), Value::Object(self.sanitize(p, depth + 1))))
                .collect();
            if !props.is_empty() {
                let known = |name: &&Value| name.as_str().is_some_and(|n| props.contains_key(n));
                let names = |key: &str| -> Vec<Value> {
                    src.get(key)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(known)
                        .cloned()
                        .collect()
                };
                let required = names("required");
                if !required.is_empty() {
                    out.insert("required".into(), Value::Array(required));
                }
                let ordering = names("propertyOrdering");
                if !ordering.is_empty() {
                    out.insert("propertyOrdering".into(), Value::Array(ordering));
                }
                out.insert("properties".into(), Value::Object(props));
                if !out.contains_key("type") && any_of.is_empty() {
                    out.insert("type".into(), Value::from("object"));
                }
            }
        }

        if let Some(items) = src.get("items").filter(|i| i.is_object()) {
            let items = self.sanitize(items, depth + 1);
            out.insert("items".into(), Value::Object(items));
            if !out.contains_key("type") && any_of.is_empty() {
                out.insert("type".into(), Value::from("array"));
            }
        }

        for key in SCHEMA_PASSTHROUGH_KEYS {
            if let Some(value) = src.get(*key) {
                out.insert((*key).to_string(), value.clone());
            }
        }
        if let Some(note) = enum_note {
            let description = match out.get("description").and_then(Value::as_str).filter(|d| !d.is_empty()) {
                Some(description) => format!("{description} {note}"),
                None => note,
            };
            out.insert("description".into(), Value::String(description));
        }

        if any_of.len() == 1 && !out.contains_key("type") {
            // `anyOf: [X, null]` (e.g. an optional field): inline X, the outer keys winning.
            for (key, value) in any_of.remove(0) {
                out.entry(key).or_insert(value);
            }
        } else if !any_of.is_empty() {
            out.insert("anyOf".into(), Value::Array(any_of.into_iter().map(Value::Object).collect()));
        }

        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        out
    }
}

/// The definition name of a local `#/$defs/Name` or `#/definitions/Name` reference (JSON-pointer
/// escapes `~1`, `~0` undone).
fn ref_name(reference: &str) -> Option<String> {
    let name = reference.strip_prefix("#/$defs/").or_else(|| reference.strip_prefix("#/definitions/"))?;
    Some(name.replace("~1", "/").replace("~0", "~"))
}

/// Merges `other` into `into`: `properties` and `required` are unioned, other keys kept if set.
fn merge_schema(into: &mut Map<String, Value>, other: Map<String, Value>) {
    for (key, value) in other {
        match (key.as_str(), into.get_mut(&key), value) {
            ("properties", Some(Value::Object(existing)), Value::Object(extra)) => {
                for (name, prop) in extra {
                    existing.entry(name).or_insert(prop);
                }
            }
            ("required", Some(Value::Array(existing)), Value::Array(extra)) => {
                for name in extra {
                    if !existing.contains(&name) {
                        existing.push(name);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, value) => {
                into.insert(key, value);
            }
        }
    }
}
