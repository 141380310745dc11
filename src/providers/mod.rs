//! LLM providers: one module per wire format, all mapping to [`types`].
pub mod types;
