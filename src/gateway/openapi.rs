//! The OpenAPI 3.1 document of the `/v1` routes, built once from this table so it cannot drift
//! from the route list (a test compares the two).

use serde_json::{Value, json};

/// Every gateway route: method, path, summary, request schema name, response description.
pub const ROUTES: &[(&str, &str, &str, Option<&str>, &str)] = &[
    (
        "get",
        "/v1/workspaces",
        "Sessions API: your workspaces (tokens of scope `sessions` or `full`).",
        None,
        "`{\"data\": [workspace]}`.",
    ),
    (
        "post",
        "/v1/workspaces",
        "Sessions API: makes a workspace.",
        Some("NewWorkspace"),
        "The workspace (201).",
    ),
    (
        "get",
        "/v1/workspaces/{id}/sessions",
        "Sessions API: a workspace's sessions, most recent first; `?archived=true` for the archived, `?page=` for more.",
        None,
        "`{\"data\": [session], \"has_more\"}`.",
    ),
    (
        "post",
        "/v1/workspaces/{id}/sessions",
        "Sessions API: makes a session in a workspace.",
        Some("NewSession"),
        "The session (201).",
    ),
    (
        "get",
        "/v1/sessions/{id}",
        "Sessions API: a session, its active path (each message with its place among its siblings) and the tool call it waits a decision on.",
        None,
        "`{session, role, path, message_count, running, pending_approval}`.",
    ),
    (
        "patch",
        "/v1/sessions/{id}",
        "Sessions API: renames or archives a session.",
        Some("SessionPatch"),
        "The session.",
    ),
    (
        "delete",
        "/v1/sessions/{id}",
        "Sessions API: deletes a session with every branch (owners only).",
        None,
        "`{id, deleted: true}`.",
    ),
    (
        "get",
        "/v1/sessions/{id}/events",
        "Sessions API: the session's run as server-sent events of JSON: `snapshot`, `delta`, `thought`, `tool_call`, `usage`, `message`, `tool_result`, `approval_request`, `error`, `done` (last). Reconnect with `Last-Event-ID` to get exactly what was missed.",
        None,
        "An event stream.",
    ),
    (
        "get",
        "/v1/sessions/{id}/activity",
        "Sessions API: the session's activity log as JSON Lines, oldest first: messages, runs started and ended, tool calls and decisions (who and when), settings changes, branch switches, compressions.",
        None,
        "`application/x-ndjson`: one `{at, kind, actor_id, actor, details}` per line.",
    ),
    (
        "get",
        "/v1/sessions/{id}/ws",
        "Sessions API: the agent server protocol over a WebSocket (`user_input`, `approval_response`; `loading_state`, `response_item`, `approval_request`, `agent_finished`, `error`).",
        None,
        "101 Switching Protocols.",
    ),
    (
        "post",
        "/v1/sessions/{id}/messages",
        "Sessions API: appends a message at the end of the active path and starts its answer; the same `client_id` twice sends it once.",
        Some("SendMessage"),
        "`{user_message_id, assistant_message_id, created}` (202).",
    ),
    (
        "get",
        "/v1/sessions/{id}/messages/{message_id}/children",
        "Sessions API: the replies below a message (its branches).",
        None,
        "`{\"data\": [message]}`.",
    ),
    (
        "post",
        "/v1/sessions/{id}/messages/{message_id}/select",
        "Sessions API: makes the active path go through a message.",
        None,
        "`{selected}`.",
    ),
    (
        "post",
        "/v1/sessions/{id}/messages/{message_id}/edit",
        "Sessions API: edits a message of yours: the new text becomes its sibling and is answered; the old branch stays.",
        Some("SendMessage"),
        "`{user_message_id, assistant_message_id, created}` (202).",
    ),
    (
        "post",
        "/v1/sessions/{id}/messages/{message_id}/regenerate",
        "Sessions API: a new answer beside this one.",
        None,
        "`{assistant_message_id}` (202).",
    ),
    (
        "post",
        "/v1/sessions/{id}/messages/{message_id}/continue",
        "Sessions API: continues a stopped or interrupted answer.",
        None,
        "`{assistant_message_id}` (202).",
    ),
    (
        "post",
        "/v1/sessions/{id}/stop",
        "Sessions API: stops the live answer, keeping what was written.",
        None,
        "`{stopped}`.",
    ),
    (
        "post",
        "/v1/sessions/{id}/tool-calls/{call_id}/decision",
        "Sessions API: decides a waiting tool call: `yes`, `no`, `no_continue`, `always` (with `scope`), `explain`.",
        Some("Decision"),
        "`{outcome, call}`.",
    ),
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
        "/v1/embeddings",
        "OpenAI embeddings from any provider that has them (OpenAI-compatible ones such as Ollama and vLLM, Gemini): `input` a string or up to 2048 strings, `encoding_format` float or base64.",
        Some("EmbeddingsRequest"),
        "A `list` of `embedding` objects with `usage`.",
    ),
    (
        "post",
        "/v1/responses",
        "OpenAI Responses, served by the provider the model names: `instructions`, `input` (a string or items), function tools, `reasoning.effort`, `previous_response_id` (your own stored responses only); `stream: true` for the documented event sequence.",
        Some("ResponsesRequest"),
        "A `response` object, or a stream from `response.created` to `response.completed` (`response.failed` on an error).",
    ),
    (
        "get",
        "/v1/responses/{id}",
        "A response you stored (`store` is on by default).",
        None,
        "The `response` object.",
    ),
    (
        "delete",
        "/v1/responses/{id}",
        "Deletes a response you stored.",
        None,
        "`{\"id\", \"object\": \"response\", \"deleted\": true}`.",
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
    (
        "get",
        "/v1beta/models",
        "Google GenAI `models.list`: the models this token's user may use, then their aliases (`name` is `models/{provider}/{model}`).",
        None,
        "`{\"models\": [...]}`.",
    ),
    ("get", "/v1beta/models/{target:.*}", "Google GenAI `models.get`: one model.", None, "A model."),
    (
        "post",
        "/v1beta/models/{target:.*}",
        "Google GenAI: `{model}:generateContent`, `{model}:streamGenerateContent` (`?alt=sse` for server-sent events, else a JSON array), `{model}:countTokens`, `{model}:embedContent` and `{model}:batchEmbedContents`. The key may come as `x-goog-api-key` or `?key=`.",
        Some("GenerateContentRequest"),
        "A `GenerateContentResponse`, a stream of them, or `{\"totalTokens\": n}`.",
    ),
];

fn error_schema() -> Value {
    json!({
        "type": "object",
        "description": "OpenAI routes answer `{\"error\": {message, type, param, code}}`; Anthropic routes `{\"type\": \"error\", \"error\": {type, message}}`; Google GenAI routes (`/v1beta`) `{\"error\": {code, message, status}}`. Unknown routes and methods answer 404 and 405 in the same shapes.",
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
            op["security"] = json!([{ "bearer": [] }, { "apiKey": [] }, { "googApiKey": [] }]);
        }
        if let Some(schema) = request {
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } }
            });
        }
        // The actix pattern `{target:.*}` is the template `{target}`.
        let template = path.replace(":.*}", "}");
        let entry = paths.entry(template).or_insert_with(|| json!({}));
        entry[*method] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Arbor gateway",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Arbor's providers in the OpenAI, Anthropic and Google GenAI formats. `model` may be `provider/model`, a model id, `model$alias`, one of your aliases, or a comma-separated fallback chain; the response's `model` names the one that answered.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer", "description": "An Arbor API token (`arb_…`)." },
                "apiKey": { "type": "apiKey", "in": "header", "name": "x-api-key" },
                "googApiKey": { "type": "apiKey", "in": "header", "name": "x-goog-api-key" }
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
                "EmbeddingsRequest": {
                    "type": "object",
                    "required": ["model", "input"],
                    "properties": {
                        "model": { "type": "string" },
                        "input": {},
                        "encoding_format": { "type": "string", "enum": ["float", "base64"] }
                    }
                },
                "ResponsesRequest": {
                    "type": "object",
                    "required": ["model", "input"],
                    "properties": {
                        "model": { "type": "string" },
                        "instructions": { "type": "string" },
                        "input": {},
                        "tools": { "type": "array", "items": { "type": "object" } },
                        "tool_choice": {},
                        "reasoning": { "type": "object", "properties": { "effort": { "type": "string" }, "summary": { "type": "string" } } },
                        "max_output_tokens": { "type": "integer", "minimum": 1 },
                        "previous_response_id": { "type": "string" },
                        "store": { "type": "boolean" },
                        "stream": { "type": "boolean" }
                    }
                },
                "GenerateContentRequest": {
                    "type": "object",
                    "required": ["contents"],
                    "properties": {
                        "contents": { "type": "array", "items": { "type": "object" } },
                        "systemInstruction": { "type": "object" },
                        "tools": { "type": "array", "items": { "type": "object" } },
                        "toolConfig": { "type": "object" },
                        "generationConfig": { "type": "object" },
                        "safetySettings": { "type": "array" }
                    }
                },
                "NewWorkspace": { "type": "object", "required": ["name"], "properties": { "name": { "type": "string", "maxLength": 200 } } },
                "NewSession": { "type": "object", "properties": { "title": { "type": "string", "maxLength": 200 } } },
                "SessionPatch": { "type": "object", "properties": { "title": { "type": "string" }, "archived": { "type": "boolean" } } },
                "SendMessage": {
                    "type": "object",
                    "required": ["text"],
                    "properties": { "text": { "type": "string" }, "model": { "type": "string" }, "client_id": { "type": "string" } }
                },
                "Decision": {
                    "type": "object",
                    "required": ["decision"],
                    "properties": {
                        "decision": { "type": "string", "enum": ["yes", "no", "no_continue", "always", "explain"] },
                        "scope": { "type": "string", "enum": ["session", "workspace"] }
                    }
                },
                "Error": error_schema()
            }
        }
    })
}
