//! The one provider interface the run engine uses, with an implementation per wire format.

use futures_util::future::BoxFuture;

use super::client::{Endpoint, EventStream, ProviderClient, RetryPolicy, WireFormat};
use super::discovery::Discovered;
use super::images::{ImageAnswer, ImageLimits, ImageRequest};
use super::types::{ChatRequest, Embeddings, ProviderError};

/// Streams chat requests, lists models and counts tokens for one configured provider.
pub trait ChatProvider: Send + Sync {
    /// Starts a streamed answer; retries before the first token happen inside.
    fn stream<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<EventStream, ProviderError>>;
    /// The model ids the provider offers.
    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>>;
    /// The prompt's size in tokens; `None` where the provider has no counting endpoint.
    fn count_tokens<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<Option<u64>, ProviderError>>;
    /// What the provider's own API says `model` can do.
    fn discover<'a>(&'a self, model: &'a str) -> BoxFuture<'a, Result<Discovered, ProviderError>>;
    /// Embeddings of `inputs` by `model`; `None` where the provider has no embeddings endpoint.
    fn embed<'a>(
        &'a self,
        model: &'a str,
        inputs: &'a [String],
    ) -> BoxFuture<'a, Result<Option<Embeddings>, ProviderError>>;
    /// Images made by an image model (see [`crate::providers::images`]), never retried.
    fn generate_images<'a>(
        &'a self,
        req: &'a ImageRequest,
        limits: ImageLimits,
    ) -> BoxFuture<'a, Result<ImageAnswer, ProviderError>>;
}

/// What every HTTP provider shares: the client, where to call and how to retry.
#[derive(Clone)]
struct Http {
    client: ProviderClient,
    endpoint: Endpoint,
    retry: RetryPolicy,
}

impl Http {
    fn stream<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<EventStream, ProviderError>> {
        Box::pin(self.client.stream(&self.endpoint, req, &self.retry))
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        Box::pin(self.client.list_models(&self.endpoint))
    }

    fn count_tokens<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<Option<u64>, ProviderError>> {
        Box::pin(self.client.count_tokens(&self.endpoint, req))
    }

    fn embed<'a>(
        &'a self,
        model: &'a str,
        inputs: &'a [String],
    ) -> BoxFuture<'a, Result<Option<Embeddings>, ProviderError>> {
        Box::pin(self.client.embed(&self.endpoint, model, inputs))
    }

    fn discover<'a>(&'a self, model: &'a str) -> BoxFuture<'a, Result<Discovered, ProviderError>> {
        Box::pin(self.client.discover(&self.endpoint, model))
    }

    fn generate_images<'a>(
        &'a self,
        req: &'a ImageRequest,
        limits: ImageLimits,
    ) -> BoxFuture<'a, Result<ImageAnswer, ProviderError>> {
        Box::pin(async move { self.client.generate_images(&self.endpoint, req, &limits).await })
    }
}

macro_rules! http_provider {
    ($(#[$doc:meta])* $name:ident, $format:expr) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(Http);

        impl $name {
            /// A provider at `base_url` with `api_key`, using the shared client.
            pub fn new(client: ProviderClient, base_url: String, api_key: crate::secret::Secret, retry: RetryPolicy) -> Self {
                let endpoint = Endpoint { format: $format, base_url, api_key, reasoning_via_responses: false };
                $name(Http { client, endpoint, retry })
            }
        }

        impl ChatProvider for $name {
            fn stream<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<EventStream, ProviderError>> {
                self.0.stream(req)
            }
            fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
                self.0.list_models()
            }
            fn count_tokens<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<Option<u64>, ProviderError>> {
                self.0.count_tokens(req)
            }
            fn embed<'a>(&'a self, model: &'a str, inputs: &'a [String]) -> BoxFuture<'a, Result<Option<Embeddings>, ProviderError>> {
                self.0.embed(model, inputs)
            }
            fn discover<'a>(&'a self, model: &'a str) -> BoxFuture<'a, Result<Discovered, ProviderError>> {
                self.0.discover(model)
            }
            fn generate_images<'a>(&'a self, req: &'a ImageRequest, limits: ImageLimits) -> BoxFuture<'a, Result<ImageAnswer, ProviderError>> {
                self.0.generate_images(req, limits)
            }
        }
    };
}

http_provider!(
    /// OpenAI Chat Completions: OpenAI itself, Ollama, vLLM, llama.cpp, OpenRouter, Groq, DeepSeek.
    OpenAiChat,
    WireFormat::OpenAi
);
impl OpenAiChat {
    /// OpenAI itself: its reasoning models go through the Responses API for their summaries.
    pub fn official(mut self) -> Self {
        self.0.endpoint.reasoning_via_responses = true;
        self
    }
}

http_provider!(
    /// Anthropic Messages.
    AnthropicChat,
    WireFormat::Anthropic
);
http_provider!(
    /// Google Gemini `streamGenerateContent` with an API key.
    GeminiChat,
    WireFormat::Gemini
);
