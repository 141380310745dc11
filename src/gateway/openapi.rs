//! The OpenAPI 3.1 document of the `/v1` routes, built once from this table so it cannot drift
//! from the route list (a test compares the two).

use serde_json::{Value, json};

/// Every gateway route: method, path, summary, request schema name, response description.
pub const ROUTES: &[(&str, &str, &str, Option<&str>, &str)] = &[
    ("get", "/v1/models", "The models this token's user may use, then their aliases.", None, "A model list."),
    (
        "post",
        "/v1/chat/completions",
        "OpenAI Chat Completions, served by the provider the model names; `stream: true` for server-sent events.",
        Some("ChatCompletionRequest"),
        "A `chat.completion`, or a stream of `chat.completion.chunk` events ending with `[DONE]`.",
    ),
    (
        "post",
        "/v1/messages",
        "Anthropic Messages, served by the provider the model names; `stream: true` for server-sent events.",
        Some("MessagesRequest"),
        "A `message`, or a stream from `message_start` to `message_stop`.",
    ),
    (
        "post",
        "/v1/messages/count_tokens",
        "The prompt's size in tokens: exact when the provider can count, else an estimate marked with `Warning: 199`.",
        Some("MessagesRequest"),
        "`{\"input_tokens\": n}`.",
    ),
    ("get", "/v1/openapi.json", "This document.", None, "The OpenAPI document."),
];

fn error_schema() -> Value {
    json!({
        "type": "object",
        "description": "OpenAI routes answer `{\"error\": {message, type, param, code}}`; Anthropic routes `{\"type\": \"error\", \"error\": {type, message}}`.",
    })
}

/// The document.
pub fn document() -> Value {
    let mut paths = serde_json::Map::new();
    for (method, path, summary, request, response) in ROUTES {
        let mut op = json!({
            "summary": summary,
            "responses": {
                "200": { "description": response },
                "400": { "description": "The request is malformed; the error names the field.", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } },
                "401": { "description": "No valid API token." },
                "403": { "description": "The token's user is disabled." },
                "404": { "description": "The model does not exist or is not available to the user." },
                "429": { "description": "A quota, rate limit or the provider's limit; see Retry-After." },
                "502": { "description": "Every model of the chain failed before answering." }
            }
        });
        if *path != "/v1/openapi.json" {
            op["security"] = json!([{ "bearer": [] }, { "apiKey": [] }]);
        }
        if let Some(schema) = request {
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } }
            });
        }
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[*method] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Arbor gateway",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Arbor's providers in the OpenAI and Anthropic formats. `model` may be `provider/model`, a model id, `model$alias`, one of your aliases, or a comma-separated fallback chain; the response's `model` names the one that answered.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer", "description": "An Arbor API token (`arb_…`)." },
                "apiKey": { "type": "apiKey", "in": "header", "name": "x-api-key" }
            },
            "schemas": {
                "ChatCompletionRequest": {
                    "type": "object",
                    "required": ["model", "messages"],
                    "properties": {
                        "model": { "type": "string" },
                        "messages": { "type": "array", "items": { "type": "object" } },
                        "tools": { "type": "array", "items": { "type": "object" } },
                        "stream": { "type": "boolean" },
                        "stream_options": { "type": "object", "properties": { "include_usage": { "type": "boolean" } } },
                        "temperature": { "type": "number", "minimum": 0, "maximum": 2 },
                        "max_tokens": { "type": "integer", "minimum": 1 },
                        "max_completion_tokens": { "type": "integer", "minimum": 1 },
                        "reasoning_effort": { "type": "string", "enum": ["low", "medium", "high"] }
                    }
                },
                "MessagesRequest": {
                    "type": "object",
                    "required": ["model", "messages", "max_tokens"],
                    "properties": {
                        "model": { "type": "string" },
                        "system": {},
                        "messages": { "type": "array", "items": { "type": "object" } },
                        "tools": { "type": "array", "items": { "type": "object" } },
                        "max_tokens": { "type": "integer", "minimum": 1 },
                        "stream": { "type": "boolean" },
                        "temperature": { "type": "number", "minimum": 0, "maximum": 1 },
                        "thinking": { "type": "object" }
                    }
                },
                "Error": error_schema()
            }
        }
    })
}
