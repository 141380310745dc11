//! LLM providers: one module per wire format, all mapping to [`types`].
pub mod anthropic;
pub mod catalog;
pub mod chat;
pub mod client;
pub mod discovery;
pub mod gemini;
pub mod images;
pub mod metered;
pub mod openai;
pub mod sse;
pub mod tokens;
pub mod types;
