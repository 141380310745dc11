//! The provider-neutral request and event types every wire format maps to and from.
//!
//! A request is built by the context renderer (system prompt + active path + tools); each
//! provider module turns it into its own JSON body, and its stream back into [`ProviderEvent`]s.

use serde::{Deserialize, Serialize};

/// Who said a message, as providers understand it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// The person.
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, answering the assistant.
    Tool,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, inline.
    Image {
        /// MIME type, e.g. `image/png`.
        mime: String,
        /// Base64 (standard alphabet, padded) of the bytes.
        data_base64: String,
    },
    /// A document (a PDF), inline, for models that read documents.
    Document {
        /// MIME type, e.g. `application/pdf`.
        mime: String,
        /// Base64 (standard alphabet, padded) of the bytes.
        data_base64: String,
        /// The file's name, as the user gave it.
        name: String,
    },
    /// Reasoning the model showed. `signature` is the provider's opaque token (Anthropic
    /// `signature`, Gemini `thoughtSignature`), kept verbatim and sent back unchanged.
    Thought {
        /// The visible reasoning text (may be empty when only a signature exists).
        text: String,
        /// Opaque provider signature.
        signature: Option<String>,
        /// Anthropic `redacted_thinking` data, kept verbatim.
        redacted: Option<String>,
    },
    /// The model asked to call a tool.
    ToolCall {
        /// Provider's call id (Gemini has none: we make one up and keep it).
        id: String,
        /// Tool name.
        name: String,
        /// Arguments as a JSON value (an object for well-behaved models).
        arguments: serde_json::Value,
        /// Gemini `thoughtSignature` attached to the function call part, kept verbatim.
        signature: Option<String>,
    },
    /// The result of a tool call.
    ToolResult {
        /// The id of the call it answers.
        call_id: String,
        /// The tool's name (Gemini needs it on the response).
        name: String,
        /// The result text.
        content: String,
        /// Whether the tool failed.
        is_error: bool,
    },
}

/// One message of the conversation sent to a provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Speaker.
    pub role: ChatRole,
    /// Content, in order.
    pub parts: Vec<Part>,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name (`[A-Za-z0-9_-]{1,64}`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object. Shared: a toolset is built once and its specs go
    /// into the request of every run offered it (a deep copy was 34 KB a live reply;
    /// BENCHMARKS.md, "Performance work", step 49).
    pub parameters: std::sync::Arc<serde_json::Value>,
}

/// How hard a reasoning model should think.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// Little.
    Low,
    /// Default.
    Medium,
    /// A lot.
    High,
}

/// Generation settings; `None` leaves the provider's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenParams {
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Largest number of output tokens.
    pub max_output_tokens: Option<u32>,
    /// Reasoning effort (OpenAI-style models).
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Thinking budget in tokens (Anthropic `budget_tokens`, Gemini `thinkingBudget`).
    pub thinking_budget: Option<u32>,
    /// Whether and which tool the model must call (`None`: the provider's default, auto).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
}

/// Whether the model may, must or must not call a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call, any tool.
    Required,
    /// A call of this tool.
    Tool(String),
}

/// Everything one model call needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The provider's model id.
    pub model: String,
    /// The rendered system prompt.
    pub system: Option<String>,
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Tools offered.
    pub tools: Vec<ToolSpec>,
    /// Generation settings.
    pub params: GenParams,
    /// A caller's Anthropic Messages body to send as it came (model and stream set by Arbor),
    /// when an Anthropic provider serves a `/v1/messages` call: fields Arbor does not model
    /// (`cache_control`, `context_management`, server tools) reach Anthropic unchanged.
    /// Other providers use the neutral fields above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passthrough: Option<Passthrough>,
}

/// A request body passed through to a provider of the caller's own wire format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Passthrough {
    /// The body as the caller sent it.
    pub body: serde_json::Value,
    /// The caller's `anthropic-beta` header, if any.
    pub beta: Option<String>,
}

/// Embedding vectors for a list of inputs, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Embeddings {
    /// One vector per input.
    pub vectors: Vec<Vec<f32>>,
    /// Input tokens the provider reported, if it did.
    pub input_tokens: Option<u64>,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end.
    Stop,
    /// The output token limit.
    Length,
    /// It wants tool results.
    ToolCalls,
    /// A safety or content filter.
    ContentFilter,
    /// Anything else, as the provider named it.
    Other(String),
}

/// Token counts for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens (including cached ones).
    pub input_tokens: u64,
    /// Generated tokens (including reasoning).
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_input_tokens: u64,
    /// Prompt tokens written to the provider's cache (Anthropic's `cache_creation_input_tokens`;
    /// part of `input_tokens`).
    #[serde(default)]
    pub cache_written_input_tokens: u64,
}

/// What a provider stream yields, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ProviderEvent {
    /// Answer text to append.
    TextDelta(String),
    /// Reasoning text to append.
    ThoughtDelta(String),
    /// A complete thought signature (attach to the current thought).
    ThoughtSignature(String),
    /// Anthropic `redacted_thinking` block data.
    RedactedThought(String),
    /// A complete tool call (arguments fully assembled from the stream's fragments).
    ToolCall {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Parsed arguments.
        arguments: serde_json::Value,
        /// Gemini thought signature of the call, if any.
        signature: Option<String>,
    },
    /// Usage so far (the last one wins).
    Usage(Usage),
    /// The stream finished normally.
    Finish(FinishReason),
    /// The provider reported an error in the stream.
    Error(ProviderError),
}

/// An error from a provider, classified for retry decisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderError {
    /// HTTP status when known (0 for in-stream errors without one).
    pub status: u16,
    /// Provider's error type/code, e.g. `rate_limit_error`, `overloaded_error`.
    pub kind: String,
    /// Provider's message (secrets redacted by the caller before showing).
    pub message: String,
    /// Whether trying again may help (429, 5xx, overloaded).
    pub retryable: bool,
    /// Seconds to wait, from `retry-after` or the body, when given.
    pub retry_after_secs: Option<u64>,
}

/// Incremental parsing failed: the bytes are not what the provider documents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected stream data from the provider: {0}")]
pub struct StreamParseError(pub String);
