//! A provider handle that records each call in the metrics: how long until the stream opened
//! (or the call failed), and with what outcome. Tokens and cost are recorded with the usage row,
//! where the final counts are known.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;

use super::chat::ChatProvider;
use super::client::EventStream;
use super::discovery::Discovered;
use super::images::{ImageAnswer, ImageLimits, ImageRequest};
use super::types::{ChatRequest, Embeddings, ProviderError};

/// Wraps a provider handle for one model.
pub struct Metered {
    inner: Arc<dyn ChatProvider>,
    provider: String,
    model: String,
}

impl Metered {
    /// `inner`, recording its streamed calls under `provider` and `model`.
    pub fn wrap(inner: Arc<dyn ChatProvider>, provider: &str, model: &str) -> Arc<dyn ChatProvider> {
        Arc::new(Metered { inner, provider: provider.to_string(), model: model.to_string() })
    }
}

/// A short word for why a call failed, fit for a metric label.
fn outcome(e: &ProviderError) -> &'static str {
    match e.status {
        401 | 403 => "unauthorized",
        429 => "rate_limited",
        400..=499 => "refused",
        500..=599 => "upstream_error",
        _ => "error",
    }
}

impl ChatProvider for Metered {
    fn stream<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<EventStream, ProviderError>> {
        Box::pin(async move {
            let started = Instant::now();
            let result = self.inner.stream(req).await;
            let label = match &result {
                Ok(_) => "ok",
                Err(e) => outcome(e),
            };
            crate::metrics::provider_call(&self.provider, &self.model, label, started.elapsed());
            result
        })
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        self.inner.list_models()
    }

    fn count_tokens<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<Option<u64>, ProviderError>> {
        self.inner.count_tokens(req)
    }

    fn discover<'a>(&'a self, model: &'a str) -> BoxFuture<'a, Result<Discovered, ProviderError>> {
        self.inner.discover(model)
    }

    fn embed<'a>(
        &'a self,
        model: &'a str,
        inputs: &'a [String],
    ) -> BoxFuture<'a, Result<Option<Embeddings>, ProviderError>> {
        self.inner.embed(model, inputs)
    }

    fn generate_images<'a>(
        &'a self,
        req: &'a ImageRequest,
        limits: ImageLimits,
    ) -> BoxFuture<'a, Result<ImageAnswer, ProviderError>> {
        Box::pin(async move {
            let started = Instant::now();
            let result = self.inner.generate_images(req, limits).await;
            let label = match &result {
                Ok(_) => "ok",
                Err(e) => outcome(e),
            };
            crate::metrics::provider_call(&self.provider, &self.model, label, started.elapsed());
            result
        })
    }
}
