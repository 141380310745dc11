//! Image generation in runs: the agent's `generate_image` tool (offered when the member has an
//! image model, see [`crate::domain::providers::Providers::image_model`]), and the reply of an
//! image model picked in the composer (one image call instead of a chat stream). Either way the
//! images are checked, stored and attached to the message that shows them (counted against the
//! member's storage), and the call's usage and cost are recorded.

use std::sync::Arc;

use serde_json::Value;
use tokio::time::Instant;

use super::{Job, RunEngine};
use crate::domain::agent::{self, GENERATE_IMAGE};
use crate::domain::files::Destination;
use crate::domain::providers::{ResolvedModel, describe_error};
use crate::domain::sessions::ChatSession;
use crate::domain::sessions::tree::{MessageStatus, MessageUsage};
use crate::events::{RunEvent, RunPublisher};
use crate::providers::catalog::ModelInfo;
use crate::providers::images::{ImageAnswer, ImageLimits, ImageRequest, ImageUsage};
use crate::providers::types::Part;
use crate::storage::repos::messages::{self as repo, Outcome};
use crate::tools::ToolOutput;

/// Most images kept from one answer.
const MAX_IMAGES: usize = 4;

/// An image call's usage priced with the model's prices (text and image input apart).
fn priced(info: &ModelInfo, usage: Option<ImageUsage>) -> MessageUsage {
    match usage {
        Some(u) => MessageUsage {
            input: u.text_input_tokens + u.image_input_tokens,
            output: u.output_tokens,
            cached: 0,
            cost_micros: info.image_cost_micros(u.text_input_tokens, u.image_input_tokens, u.output_tokens),
            estimated: false,
        },
        // Nothing reported: the call is counted, its cost is not known.
        None => MessageUsage { input: 0, output: 0, cached: 0, cost_micros: None, estimated: true },
    }
}

/// How a composer image reply ended.
enum Made {
    /// The images are attached; the text the model wrote beside them.
    Done(String),
    /// Nothing is attached; the reason, for the person.
    Failed(String),
}

impl RunEngine {
    /// What a generated image may be: the per-file limit of uploads, a few per answer.
    fn image_limits(&self) -> ImageLimits {
        ImageLimits {
            max_images: MAX_IMAGES,
            max_image_bytes: usize::try_from(self.file_limit()).unwrap_or(usize::MAX),
        }
    }

    /// The tools a run adds once it starts: `generate_image` when the member has an image
    /// model, then those of the MCP servers they may use.
    pub(super) async fn add_run_tools(&self, job: &mut Job) {
        self.add_image_tool(job).await;
        self.add_mcp_tools(job).await;
    }

    async fn add_image_tool(&self, job: &mut Job) {
        let offered = job.tools.iter().any(|t| t.spec.name == GENERATE_IMAGE);
        if job.tools.is_empty() || offered || self.files.is_none() {
            return;
        }
        if self.providers().image_model(&job.actor).await.is_none() {
            return;
        }
        let mut tools = job.tools.as_ref().clone();
        tools.push(agent::image_tool());
        job.request.tools = tools.iter().map(|t| t.spec.clone()).collect();
        job.tools = Arc::new(tools);
    }

    /// `generate_image`: makes the image with the member's image model, attaches it to the
    /// tool's result message (`job.message_id`) and tells the model its name.
    pub(super) async fn generate_image_tool(
        &self,
        job: &Job,
        session: &ChatSession,
        arguments: &Value,
    ) -> ToolOutput {
        let Some(files) = &self.files else { return ToolOutput::error("Files are not available.") };
        let Some(prompt) = arguments.get("prompt").and_then(Value::as_str).filter(|p| !p.trim().is_empty())
        else {
            return ToolOutput::error("generate_image needs \"prompt\": what to draw.");
        };
        let refs: Vec<String> = match arguments.get("images") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.len() <= crate::providers::images::MAX_INPUT_IMAGES => {
                match items.iter().map(|i| i.as_str().map(str::to_string)).collect::<Option<Vec<_>>>() {
                    Some(refs) => refs,
                    None => return ToolOutput::error("\"images\" lists image names as strings."),
                }
            }
            Some(_) => return ToolOutput::error("\"images\" is a list of at most 16 image names."),
        };
        let Some(reference) = self.providers().image_model(&job.actor).await else {
            return ToolOutput::error("No image model is available to this user.");
        };
        let model = match self.image_model_for(job, session, &reference).await {
            Ok(model) => model,
            Err(message) => return ToolOutput::error(message),
        };
        let inputs = match files.thread_images(job.session_id, &refs).await {
            Ok(inputs) => inputs,
            Err(message) => return ToolOutput::error(message),
        };
        let request = ImageRequest { model: model.model.clone(), prompt: prompt.to_string(), inputs };
        let started = Instant::now();
        let answer = match model.chat.generate_images(&request, self.image_limits()).await {
            Ok(answer) => answer,
            Err(e) => {
                return ToolOutput::error(format!("The image could not be made: {}", describe_error(&e)));
            }
        };
        let usage = priced(&model.info, answer.usage);
        self.record_call(job.owner_id, (job.session_id, job.message_id), &model, usage, started).await;
        let to = Destination { member: job.owner_id, session_id: job.session_id, message_id: job.message_id };
        match files.attach_generated(to, answer.images).await {
            Ok(views) => {
                let names: Vec<String> = views.iter().map(|v| format!("{} (id {})", v.name, v.id)).collect();
                let mut text = format!(
                    "Made with {reference} and shown to the user in the conversation: {}. Refer to it by name to change it.",
                    names.join(", ")
                );
                if !answer.text.is_empty() {
                    text.push_str(&format!("\nThe image model said: {}", answer.text));
                }
                ToolOutput::ok(text)
            }
            Err(e) => ToolOutput::error(format!("The image was made but not kept: {e}")),
        }
    }

    /// Resolves the image model for a tool call, after the member's spending and storage
    /// quotas; the refusal is a message for the model.
    async fn image_model_for(
        &self,
        job: &Job,
        session: &ChatSession,
        reference: &str,
    ) -> Result<ResolvedModel, String> {
        self.quotas.check(job.owner_id).await.map_err(|e| e.to_string())?;
        let files = self.files.as_ref().ok_or("Files are not available.")?;
        files.room_for_images(job.owner_id).await.map_err(|e| e.to_string())?;
        let key = self.workspace_key(&job.actor, session).await.map_err(|e| e.to_string())?;
        self.providers().resolve_in(&job.actor, reference, key).await.map_err(|e| e.to_string())
    }

    /// The reply of an image model picked in the composer: one image call with the question's
    /// text and its attached images; the answer gets the images and any text the model wrote.
    pub(super) async fn image_reply(&self, job: Job, mut publisher: RunPublisher) {
        let started = Instant::now();
        let mut usage = None;
        let made = tokio::select! {
            biased;
            _ = publisher.cancelled() => None,
            made = self.make_images(&job, &mut usage) => Some(made),
        };
        let (parts, status, run_status, error) = match made {
            Some(Made::Done(text)) => {
                let parts = if text.is_empty() { Vec::new() } else { vec![Part::Text { text }] };
                (parts, MessageStatus::Complete, "completed", None)
            }
            Some(Made::Failed(message)) => (Vec::new(), MessageStatus::Error, "failed", Some(message)),
            None if self.registry.is_stopping() => {
                (Vec::new(), MessageStatus::Interrupted, "interrupted", None)
            }
            None => (Vec::new(), MessageStatus::Stopped, "cancelled", None),
        };
        let outcome = Outcome { parts: &parts, status, run_status, error: error.as_deref(), usage };
        let row = usage.map(|usage| self.charge_usage(&job, usage, started));
        self.finish_with_usage(&job, &outcome, row.as_ref()).await;
        tracing::info!(run = %job.run_id, session = %job.session_id, status = run_status, "image reply ended");
        match error {
            Some(message) => publisher.finish(RunEvent::Error(message)),
            None => publisher.finish(RunEvent::Done { message_id: Some(job.message_id), plain: false }),
        }
    }

    /// Makes and attaches the images of a composer reply; `usage` is set once the provider
    /// answered (it is paid for even when the images cannot be kept).
    async fn make_images(&self, job: &Job, usage: &mut Option<MessageUsage>) -> Made {
        let Some(files) = &self.files else { return Made::Failed("Files are not available.".into()) };
        if let Err(e) = files.room_for_images(job.owner_id).await {
            return Made::Failed(e.to_string());
        }
        let (prompt, inputs) = match self.question_of(job, files).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(run = %job.run_id, error = %e, "the question of an image reply could not be read");
                return Made::Failed("The question could not be read.".into());
            }
        };
        let request = ImageRequest { model: job.model.model.clone(), prompt, inputs };
        let answer: ImageAnswer = match job.model.chat.generate_images(&request, self.image_limits()).await {
            Ok(answer) => answer,
            Err(e) => return Made::Failed(describe_error(&e)),
        };
        *usage = Some(priced(&job.model.info, answer.usage));
        let to = Destination { member: job.owner_id, session_id: job.session_id, message_id: job.message_id };
        match files.attach_generated(to, answer.images).await {
            Ok(_) => Made::Done(answer.text),
            Err(e) => Made::Failed(format!("The image was made but not kept: {e}")),
        }
    }

    /// The text of the message the reply answers, and its attached images.
    async fn question_of(
        &self,
        job: &Job,
        files: &crate::domain::files::Files,
    ) -> crate::domain::DomainResult<(String, Vec<crate::providers::images::InputImage>)> {
        let answer = repo::find_message(&self.db, job.session_id, job.message_id)
            .await?
            .ok_or(crate::domain::DomainError::NotFound)?;
        let parent = answer.parent_id.ok_or(crate::domain::DomainError::NotFound)?;
        let question = repo::find_message(&self.db, job.session_id, parent)
            .await?
            .ok_or(crate::domain::DomainError::NotFound)?;
        let inputs = files.message_images(&[question.id]).await?;
        Ok((question.text(), inputs))
    }
}
