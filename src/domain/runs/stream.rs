//! Driving a run once it is launched: the task that calls the model, pumps its stream into the
//! tree and the run registry (coalesced, so the page gets a delta per frame, not per token),
//! concludes it, records its usage and proposes a title.

use super::answer::Outbox;
use super::*;
use crate::domain::admin::quota_holds::QuotaHold;
use crate::storage::retry::Backoff;

impl RunEngine {
    /// Renders the request for `path` (with the files and attachments it carries) and hands the
    /// run to its task.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn launch(
        &self,
        actor: &Actor,
        session: &ChatSession,
        system: Option<&str>,
        path: &[Message],
        model: ResolvedModel,
        mode: Mode,
        files: Files,
        ids: (Uuid, Uuid),
        prior: Option<&Message>,
        publisher: RunPublisher,
    ) {
        let supplements = self.supplements(session, path, &model, files).await;
        let (run_id, message_id) = ids;
        let reference = model.reference();
        let params = gen_params(session);
        let mut request = context::render(&ContextInput {
            system,
            path,
            model_reference: &reference,
            model_id: &model.model,
            kind: model.kind,
            params: params.clone(),
            mode,
            attachments: Some(&supplements.attachments),
            files: &supplements.files,
        });
        let tools = self.offered_tools(session, &model);
        request.tools = tools.iter().map(|t| t.spec.clone()).collect();
        let job = Job {
            actor: actor.clone(),
            system: system.map(str::to_string),
            params,
            tools,
            session_id: session.id,
            workspace_id: session.workspace_id,
            owner_id: actor.user_id(),
            run_id,
            message_id,
            model,
            request,
            // A continued answer keeps its text and usage; new text and tokens are added.
            parts: prior.map(|m| m.parts.clone()).unwrap_or_default(),
            prior_usage: prior.and_then(|m| m.usage),
            // Answering the session's first message: the moment to propose a title.
            first_question: match path
                .iter()
                .filter(|m| m.role != Role::System)
                .collect::<Vec<_>>()
                .as_slice()
            {
                [only] if only.role == Role::User && !session.title_user_set && self.infer_titles => {
                    Some(only.text())
                }
                _ => None,
            },
            // The run was written a moment ago with its first call counted.
            next_call_counted: true,
        };
        self.spawn(job, publisher);
    }

    pub(super) fn spawn(&self, job: Job, publisher: RunPublisher) {
        tokio::spawn(live_reply(self.clone(), Box::new(job), publisher));
    }

    pub(super) async fn drive(&self, mut job: Box<Job>, publisher: RunPublisher) {
        if job.model.info.image_output {
            return Box::pin(self.image_reply(*job, publisher)).await;
        }
        Box::pin(self.add_run_tools(&mut job)).await;
        self.run_loop(job, publisher, Start::Model).await;
    }

    /// One model call into `job.message_id`: what it produced, how it ended, and what it holds
    /// of the owner's quota (to drop once its usage is stored, so parallel runs cannot
    /// overspend the quota together).
    pub(super) async fn call_model(
        &self,
        job: &mut Job,
        publisher: &mut RunPublisher,
    ) -> (Accumulator, End, Option<QuotaHold>) {
        let mut acc = Accumulator::new(job.parts.clone());
        let hold = match Box::pin(self.hold_quota(job.owner_id, &job.request, &job.model)).await {
            Ok(hold) => hold,
            Err(refused) => return (acc, End::Failed(refused), None),
        };
        if !std::mem::take(&mut job.next_call_counted)
            && let Err(e) = Box::pin(agent_repo::bump_iterations(&self.db, job.run_id)).await
        {
            tracing::warn!(run = %job.run_id, error = %e, "could not count a model call");
        }
        let job = &*job;
        let connected = tokio::select! {
            biased;
            _ = publisher.cancelled() => None,
            r = job.model.chat.stream(&job.request) => Some(r),
        };
        let connected = match connected {
            Some(Err(e)) if refuses_tools(&e) && !job.request.tools.is_empty() => {
                Some(Box::pin(self.again_without_tools(job, publisher, &mut acc)).await)
            }
            other => other,
        };
        let end = match connected {
            None => End::Stopped,
            Some(Err(e)) => End::Failed(describe_error(&e)),
            Some(Ok(stream)) => self.pump(job, publisher, stream, &mut acc).await,
        };
        (acc, end, Some(hold))
    }

    /// The model's upstream refused the tool definitions (a model nothing was known about):
    /// say so in the reply, remember it for the model, and ask again without tools.
    async fn again_without_tools(
        &self,
        job: &Job,
        publisher: &mut RunPublisher,
        acc: &mut Accumulator,
    ) -> Result<crate::providers::client::EventStream, crate::providers::types::ProviderError> {
        let reference = job.model.reference();
        tracing::info!(model = %reference, "the upstream refused tool definitions; asking again without them");
        self.providers().note_refuses_tools(&job.model.facts_key()).await;
        let notice = format!(
            "{reference} does not take tool definitions, so it answers without tools; Arbor will not offer it tools again.\n\n"
        );
        acc.apply(ProviderEvent::ThoughtDelta(notice.clone()));
        publisher.publish(RunEvent::Thought(notice));
        let mut request = job.request.clone();
        request.tools.clear();
        request.params.tool_choice = None;
        tokio::select! {
            biased;
            _ = publisher.cancelled() => Err(crate::providers::types::ProviderError {
                status: 0,
                kind: "cancelled".into(),
                message: "stopped".into(),
                retryable: false,
                retry_after_secs: None,
            }),
            r = job.model.chat.stream(&request) => r,
        }
    }

    /// Reads the stream to its end, publishing and saving as it goes.
    pub(super) async fn pump(
        &self,
        job: &Job,
        publisher: &mut RunPublisher,
        mut stream: crate::providers::client::EventStream,
        acc: &mut Accumulator,
    ) -> End {
        let Pacing { coalesce, flush } = self.pacing;
        let mut out = Outbox::default();
        // The first text goes out at once; later text waits for the coalescing window.
        let mut last_emit = Instant::now().checked_sub(coalesce).unwrap_or_else(Instant::now);
        let mut emit_at: Option<Instant> = None;
        let mut last_flush = Instant::now();
        let mut flush_at: Option<Instant> = None;
        let mut end: Option<End> = None;
        // Partial text is written by a companion task, so a slow database never holds up the
        // stream; it always writes the newest snapshot and is awaited before the outcome is.
        let (snapshot, latest) = tokio::sync::watch::channel(Vec::<Part>::new());
        let saver = tokio::spawn(partial_text_saver(self.db.clone(), job.message_id, job.run_id, latest));
        // One timer for the whole answer, moved only when the next deadline changes: a timer
        // made in every turn of the loop was registered and removed again for every chunk.
        let timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(timer);
        let mut armed: Option<Instant> = None;
        // Likewise one wait for Stop (a new one registered with the channel on every chunk).
        let stop = publisher.stop_signal();
        tokio::pin!(stop);
        loop {
            let wake = match (emit_at, flush_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(at) = wake
                && armed != Some(at)
            {
                timer.as_mut().reset(at);
                armed = Some(at);
            }
            tokio::select! {
                biased;
                _ = &mut stop => {
                    end = Some(End::Stopped);
                    break;
                }
                _ = &mut timer, if wake.is_some() => {}
                ev = stream.next() => {
                    let Some(ev) = ev else { break };
                    let mut changed = true;
                    match &ev {
                        ProviderEvent::TextDelta(t) => out.text.push_str(t),
                        ProviderEvent::ThoughtDelta(t) => out.thoughts.push_str(t),
                        ProviderEvent::ToolCall { name, arguments, .. } => {
                            out.emit(publisher);
                            publisher.publish(RunEvent::ToolCall { name: name.clone(), arguments: arguments.to_string() });
                        }
                        ProviderEvent::Usage(u) => {
                            publisher.publish(RunEvent::Usage { input: u.input_tokens, output: u.output_tokens });
                            changed = false;
                        }
                        ProviderEvent::Finish(_) => {
                            end = Some(End::Finished);
                            changed = false;
                        }
                        ProviderEvent::Error(e) => {
                            end = Some(End::Failed(describe_error(e)));
                            changed = false;
                        }
                        ProviderEvent::ThoughtSignature(_) | ProviderEvent::RedactedThought(_) => {}
                    }
                    acc.apply(ev);
                    if changed {
                        if emit_at.is_none() {
                            let due = last_emit + coalesce;
                            emit_at = Some(due.max(Instant::now()));
                        }
                        if flush_at.is_none() {
                            flush_at = Some((last_flush + flush).max(Instant::now()));
                        }
                    }
                }
            }
            let now = Instant::now();
            if emit_at.is_some_and(|t| t <= now) {
                out.emit(publisher);
                last_emit = now;
                emit_at = None;
            }
            if flush_at.is_some_and(|t| t <= now) {
                snapshot.send_replace(acc.parts.clone());
                last_flush = now;
                flush_at = None;
            }
        }
        out.emit(publisher);
        drop(snapshot);
        if let Err(e) = saver.await {
            tracing::warn!(run = %job.run_id, error = %e, "the partial-text writer failed");
        }
        end.unwrap_or_else(|| End::Failed("The provider ended the answer before finishing it.".into()))
    }

    /// This call's usage (estimated when the provider gave none) and the message's total.
    pub(super) fn usage_of(
        &self,
        job: &Job,
        acc: &Accumulator,
        end: &End,
    ) -> (Option<MessageUsage>, Option<MessageUsage>) {
        let produced = acc.produced_chars();
        let call_usage = match acc.usage {
            Some(u) => Some((u, false)),
            // Without the provider's figures: estimate, and say so.
            None if produced > 0 || matches!(end, End::Finished) => Some((
                Usage {
                    input_tokens: crate::providers::tokens::count_request(&job.request),
                    output_tokens: crate::providers::tokens::count_parts(&acc.parts),
                    ..Usage::default()
                },
                true,
            )),
            None => None,
        };
        let call = call_usage.map(|(u, estimated)| MessageUsage::priced(&u, &job.model.info, estimated));
        let total = match (job.prior_usage, call) {
            (Some(p), Some(c)) => Some(p.plus(c)),
            (p, c) => c.or(p),
        };
        (call, total)
    }

    /// Records the outcome, then ends the stream for every subscriber.
    pub(super) async fn conclude(
        &self,
        job: Job,
        publisher: RunPublisher,
        acc: Accumulator,
        end: End,
        started: Instant,
    ) {
        let (status, run_status, error) = match &end {
            End::Finished => (MessageStatus::Complete, "completed", None),
            // Stopped by the server going down, not by its member: Continue picks it up.
            End::Stopped if self.registry.is_stopping() => (MessageStatus::Interrupted, "interrupted", None),
            End::Stopped => (MessageStatus::Stopped, "cancelled", None),
            End::Failed(m) => (MessageStatus::Error, "failed", Some(m.clone())),
        };
        let (call, total) = self.usage_of(&job, &acc, &end);
        let outcome =
            Outcome { parts: &acc.parts, status, run_status, error: error.as_deref(), usage: total };
        let row = call.map(|usage| self.charge_usage(&job, usage, started));
        self.finish_with_usage(&job, &outcome, row.as_ref()).await;
        if let (End::Finished, Some(question)) = (&end, job.first_question.as_deref()) {
            self.propose_title(&job, question, &acc.text()).await;
        }
        tracing::info!(run = %job.run_id, session = %job.session_id, status = run_status, "reply ended");
        let plain = plain_answer(&job.request.messages, &acc.parts, &end);
        match end {
            End::Failed(message) => publisher.finish(RunEvent::Error(message)),
            _ => publisher.finish(RunEvent::Done { message_id: Some(job.message_id), plain }),
        }
    }
}

/// A live reply's task, held whole while the reply streams. The job is boxed, and this is an
/// async block rather than an async fn: rustc keeps an async fn's argument beside the local it
/// is moved into, so each frame the job (700 bytes) or the engine passed through held it twice.
#[allow(clippy::manual_async_fn)] // see above: an async fn would hold the engine twice
pub(super) fn live_reply(
    engine: RunEngine,
    job: Box<Job>,
    publisher: RunPublisher,
) -> impl std::future::Future<Output = ()> + Send {
    async move { engine.drive(job, publisher).await }
}

/// The companion task of a streaming reply that writes its newest partial text. The write is
/// boxed, so the task waits for the next snapshot in a few hundred bytes.
pub(super) async fn partial_text_saver(
    db: Db,
    message_id: Uuid,
    run_id: Uuid,
    mut latest: tokio::sync::watch::Receiver<Vec<Part>>,
) {
    while latest.changed().await.is_ok() {
        let parts = latest.borrow_and_update().clone();
        if let Err(e) = Box::pin(repo::save_parts(&db, message_id, &parts)).await {
            tracing::warn!(run = %run_id, error = %e, "could not save a reply's partial text");
        }
    }
}

/// Whether a reply was a plain answer: finished, of text (and thoughts) only, after no tool work
/// since the person's last message. Then the run wrote this one message and nothing beside it
/// changed: no call waits for a decision or was left unfinished, no file was attached, the todo
/// list is as it was (see [`RunEvent::Done`]). Tool work of an earlier run counts too: it errs
/// towards "not plain", whose page reads everything.
pub(super) fn plain_answer(
    request: &[crate::providers::types::ChatMessage],
    answer: &[Part],
    end: &End,
) -> bool {
    use crate::providers::types::ChatRole;
    let answer_is_text = answer.iter().all(|p| matches!(p, Part::Text { .. } | Part::Thought { .. }));
    let since_question = request.iter().rev().take_while(|m| m.role != ChatRole::User);
    let tool_work =
        since_question.flat_map(|m| &m.parts).any(|p| !matches!(p, Part::Text { .. } | Part::Thought { .. }));
    matches!(end, End::Finished) && answer_is_text && !tool_work
}

impl RunEngine {
    /// Writes one provider call's usage row (per call, so a title call counts too).
    pub(super) async fn record_usage(&self, job: &Job, usage: MessageUsage, started: Instant) {
        self.record_call(job.owner_id, (job.session_id, job.message_id), &job.model, usage, started).await;
    }

    /// Writes the usage row of one provider call made for `owner` in a session, about a message.
    pub(super) async fn record_call(
        &self,
        owner: Uuid,
        about: (Uuid, Uuid),
        model: &ResolvedModel,
        usage: MessageUsage,
        started: Instant,
    ) {
        let row = self.charge_call(owner, about, model, usage, started);
        if let Err(e) = repo::insert_usage(&self.db, &row).await {
            tracing::warn!(session = %about.0, error = %e, "could not record usage");
        }
    }

    /// Counts one provider call against `owner`'s quota and returns its usage row, to be written
    /// by [`Self::record_call`] or with the end of the reply ([`Self::finish_with_usage`]).
    fn charge_call<'m>(
        &self,
        owner: Uuid,
        (session_id, message_id): (Uuid, Uuid),
        model: &'m ResolvedModel,
        usage: MessageUsage,
        started: Instant,
    ) -> repo::UsageRow<'m> {
        self.providers.spend_tokens(owner, &model.provider, usage.input + usage.output);
        repo::UsageRow {
            user_id: owner,
            session_id: Some(session_id),
            message_id: Some(message_id),
            provider: &model.provider,
            model: &model.model,
            usage,
            latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            via: "ui",
        }
    }

    /// [`Self::charge_call`] for the job's own call.
    pub(super) fn charge_usage<'j>(
        &self,
        job: &'j Job,
        usage: MessageUsage,
        started: Instant,
    ) -> repo::UsageRow<'j> {
        self.charge_call(job.owner_id, (job.session_id, job.message_id), &job.model, usage, started)
    }

    /// Records a reply's end and its last call's usage row in one transaction, tried again
    /// while the database refuses it for a moment ([`crate::storage::retry`]: the reply exists
    /// nowhere else once this run ends); when it is given up, the usage row is still tried alone
    /// (the call was made and is paid for).
    pub(super) async fn finish_with_usage(
        &self,
        job: &Job,
        outcome: &Outcome<'_>,
        row: Option<&repo::UsageRow<'_>>,
    ) {
        // Stamped once: every attempt writes the same row, counted once.
        let row = row.map(repo::StampedUsage::of);
        let mut backoff = Backoff::default();
        let e = loop {
            let written = repo::finish(&self.db, job.message_id, job.run_id, outcome, row.as_ref()).await;
            let Err(e) = written else { return };
            crate::metrics::write_failed("reply_end");
            let attempt = backoff.attempt();
            tracing::warn!(run = %job.run_id, attempt, error = %e, "could not record the end of a reply");
            if !e.may_pass_again() || !backoff.wait_for_next().await {
                break e;
            }
        };
        tracing::error!(run = %job.run_id, error = %e, "the end of a reply was given up");
        if let Some(row) = &row
            && let Err(e) = repo::insert_stamped(&self.db, row).await
        {
            tracing::warn!(session = %job.session_id, error = %e, "could not record usage");
        }
    }

    /// Asks the model for a short title for the session's first exchange and sets it, unless
    /// the user named the session or its workspace turned titles off. Bounded in time; a failure
    /// only leaves the title taken from the first message.
    pub(super) async fn propose_title(&self, job: &Job, question: &str, answer: &str) {
        use crate::storage::repos::workspaces as workspace_repo;
        // By id: in a shared workspace the session belongs to the workspace's owner, not to the
        // person whose run this is (who was checked when the run started).
        let Ok(Some(session)) = workspace_repo::find_session_by_id(&self.db, job.session_id).await else {
            return;
        };
        let Ok(Some(workspace)) = workspace_repo::find_workspace_by_id(&self.db, session.workspace_id).await
        else {
            return;
        };
        if session.title_user_set || !workspace.infer_titles {
            return;
        }
        let clip = |t: &str| t.chars().take(TITLE_CONTEXT_CHARS).collect::<String>();
        let request = ChatRequest {
            model: job.request.model.clone(),
            system: Some(TITLE_INSTRUCTION.into()),
            messages: vec![crate::providers::types::ChatMessage {
                role: crate::providers::types::ChatRole::User,
                parts: vec![Part::Text {
                    text: format!("User:\n{}\n\nAssistant:\n{}", clip(question), clip(answer)),
                }],
            }],
            tools: Vec::new(),
            params: GenParams { max_output_tokens: Some(32), ..GenParams::default() },
            passthrough: None,
        };
        let started = Instant::now();
        let Ok((text, usage)) = side_call(&job.model, &request, TITLE_CONTEXT_CHARS, TITLE_TIMEOUT).await
        else {
            tracing::info!(session = %job.session_id, "no title was proposed");
            return;
        };
        if let Some(u) = usage {
            let usage = MessageUsage::priced(&u, &job.model.info, false);
            self.record_usage(job, usage, started).await;
        }
        let Some(title) = clean_title(&text) else { return };
        if let Err(e) =
            workspace_repo::rename_session(&self.db, session.owner_id, session.id, &title, false).await
        {
            tracing::warn!(error = %e, "could not set a proposed title");
        }
    }
}

/// How a side call (a title, an explanation, a summary) went wrong, for the person.
pub(crate) enum SideCallError {
    /// The provider failed; the text is safe to show.
    Failed(String),
    /// It took longer than allowed.
    TimedOut,
}

/// One whole text answer from `model` outside a run (no tools, nothing streamed to a page):
/// its text, at most `max_chars` of it, and the usage the provider reported.
pub(crate) async fn side_call(
    model: &ResolvedModel,
    request: &ChatRequest,
    max_chars: usize,
    within: std::time::Duration,
) -> Result<(String, Option<Usage>), SideCallError> {
    let call = async {
        let mut stream = model.chat.stream(request).await.map_err(|e| describe_error(&e))?;
        let (mut text, mut usage) = (String::new(), None);
        while let Some(ev) = stream.next().await {
            match ev {
                ProviderEvent::TextDelta(t) => {
                    text.push_str(&t);
                    if text.len() > max_chars {
                        break;
                    }
                }
                ProviderEvent::Usage(u) => usage = Some(u),
                ProviderEvent::Error(e) => return Err(describe_error(&e)),
                _ => {}
            }
        }
        Ok((text, usage))
    };
    match tokio::time::timeout(within, call).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(message)) => Err(SideCallError::Failed(message)),
        Err(_) => Err(SideCallError::TimedOut),
    }
}

/// What the title call asks for.
const TITLE_INSTRUCTION: &str = "Write a title of at most six words for the conversation below. \
Answer with the title alone: no quotes, no punctuation at the end, no preamble.";

/// How much of the question and the answer the title call sees, in characters.
const TITLE_CONTEXT_CHARS: usize = 2000;

/// Longest wait for a proposed title; the answer's "done" waits for it.
const TITLE_TIMEOUT: Duration = Duration::from_secs(5);

/// A model's proposed title made fit for the sidebar: its first line, without quotes, a
/// "Title:" prefix or markdown marks; `None` when nothing usable is left.
pub fn clean_title(raw: &str) -> Option<String> {
    let line = raw.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.strip_prefix("Title:").or_else(|| line.strip_prefix("title:")).unwrap_or(line);
    let line = line.trim_matches(|c: char| matches!(c, '"' | '\'' | '*' | '#' | '`' | '“' | '”' | ' ' | '.'));
    let line: String = line.chars().filter(|c| !c.is_control()).collect();
    if line.is_empty() {
        return None;
    }
    Some(sessions::title_from(&line))
}

/// Whether an upstream refused a request because of its tools: a 400 (or 422) whose message
/// names tools or functions, as OpenAI-compatible servers without tool support answer.
fn refuses_tools(e: &crate::providers::types::ProviderError) -> bool {
    let message = e.message.to_ascii_lowercase();
    matches!(e.status, 400 | 422)
        && ["tool", "function"].iter().any(|w| message.contains(w))
        && ["not support", "unsupported", "does not", "doesn't", "not allowed", "unknown", "invalid"]
            .iter()
            .any(|w| message.contains(w))
}
