//! Context rendering benchmark: the time to turn a long path into one provider request
//! (target: under 5 ms for a 5,000-message path with 20 boundaries and 30 tracked files).
//!
//! ```sh
//! cargo bench --bench context -- [--messages 5000] [--boundaries 20] [--runs 200]
//! ```
//!
//! Builds a path in memory, root first: question/answer turns where every third answer calls a
//! tool whose result is 20,000 characters (so the cutting of old results is part of the work),
//! with `--boundaries` boundaries spread evenly (alternately a summary and a task finished four
//! turns later), the read_file calls cycling through 30 files that are carried in context (as
//! `runs::ambient` carries them: their earlier results become pointers). It then renders the request for the path's last
//! question `--runs` times, as a reply does (`window` walks from the leaf to the nearest
//! boundary, `render` builds the messages from there), and once more for the same path without
//! boundaries or tracked files (everything is sent). Results are printed as markdown and written to
//! `bench/results/arbor-context.md`.

use std::time::{Duration, Instant};

use arbor::config::ProviderKind;
use arbor::domain::runs::ambient::AmbientFile;
use arbor::domain::runs::context::{self, ContextInput, Mode};
use arbor::domain::sessions::tree::{Message, MessageKind, MessageStatus, Role};
use arbor::providers::types::{GenParams, Part};
use uuid::Uuid;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn message(role: Role, kind: MessageKind, parts: Vec<Part>) -> Message {
    Message {
        id: Uuid::now_v7(),
        session_id: Uuid::nil(),
        parent_id: None,
        chosen_child_id: None,
        role,
        kind,
        parts,
        model: (role == Role::Assistant).then(|| "openai/gpt-4o".to_string()),
        status: MessageStatus::Complete,
        error: None,
        usage: None,
        tokens: None,
        client_id: None,
        author_id: None,
        created_at: chrono::Utc::now(),
    }
}

/// Files touched on the path (read_file calls cycle through them) and carried in context.
const TRACKED_FILES: usize = 30;

fn path(total: usize, boundaries: usize) -> Vec<Message> {
    let every = if boundaries == 0 { usize::MAX } else { (total / (boundaries + 1)).max(1) };
    let mut out = Vec::with_capacity(total);
    let mut turn = 0;
    let mut written = 0;
    // A task ends a few turns after it starts.
    let mut task_ends_at: Option<usize> = None;
    while out.len() + 1 < total {
        turn += 1;
        if task_ends_at == Some(turn) {
            let text = format!("Task {turn} done: the parser handles step {turn}.");
            out.push(message(Role::System, MessageKind::TaskEnd, vec![Part::Text { text }]));
            task_ends_at = None;
        }
        if out.len() / every > written && task_ends_at.is_none() {
            written += 1;
            // Boundaries alternate: a summary, then a task that is finished later.
            if written % 2 == 1 {
                let text =
                    format!("## Goals\nSummary {turn} of the work so far.\n## Next steps\nStep {turn}.");
                out.push(message(Role::System, MessageKind::Summary, vec![Part::Text { text }]));
            } else {
                let text = format!("Port step {turn} of the parser");
                out.push(message(Role::System, MessageKind::TaskStart, vec![Part::Text { text }]));
                task_ends_at = Some(turn + 4);
            }
        }
        let question = format!("Question {turn}: what does step {turn} change, and why?");
        out.push(message(Role::User, MessageKind::Text, vec![Part::Text { text: question }]));
        if turn % 3 == 0 && out.len() + 3 < total {
            let id = format!("call_{turn}");
            out.push(message(
                Role::Assistant,
                MessageKind::Text,
                vec![Part::ToolCall {
                    id: id.clone(),
                    name: "read_file".into(),
                    arguments: serde_json::json!({ "path": format!("src/step_{}.rs", turn % TRACKED_FILES) }),
                    signature: None,
                }],
            ));
            out.push(message(
                Role::Tool,
                MessageKind::ToolResult,
                vec![Part::ToolResult {
                    call_id: id,
                    name: "read_file".into(),
                    content: format!("fn step_{turn}() {{}}\n").repeat(1_000),
                    is_error: false,
                }],
            ));
        }
        let answer = format!("Answer {turn}: step {turn} changes the **parser**; see `step_{turn}`.");
        out.push(message(Role::Assistant, MessageKind::Text, vec![Part::Text { text: answer }]));
    }
    out.push(message(Role::User, MessageKind::Text, vec![Part::Text { text: "And now?".into() }]));
    out
}

fn time(path: &[Message], files: &[AmbientFile], runs: usize) -> (Vec<Duration>, usize) {
    let mut times = Vec::with_capacity(runs);
    let mut sent = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let request = context::render(&ContextInput {
            system: Some("You are a careful engineer."),
            path,
            model_reference: "openai/gpt-4o",
            model_id: "gpt-4o",
            kind: ProviderKind::OpenAi,
            params: GenParams::default(),
            mode: Mode::Answer,
            attachments: None,
            files,
        });
        times.push(started.elapsed());
        sent = request.messages.len();
    }
    times.sort();
    (times, sent)
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

fn main() {
    let total = arg("--messages", 5_000);
    let boundaries = arg("--boundaries", 20);
    let runs = arg("--runs", 200).max(1);
    let mut report = format!(
        "# Context rendering\n\n{total}-message path, {runs} renders each (release build, one thread).\n\n\
         | path | messages sent | p50 ms | p99 ms | max ms |\n| --- | --- | --- | --- | --- |\n"
    );
    let files: Vec<AmbientFile> = (0..TRACKED_FILES)
        .map(|i| AmbientFile {
            path: format!("src/step_{i}.rs"),
            content: format!("fn step_{i}() {{}}\n").repeat(100),
            shown_by: None,
        })
        .collect();
    let with =
        format!("{boundaries} boundaries (summaries and finished tasks), {TRACKED_FILES} tracked files");
    for (label, b) in [(with, boundaries), ("no boundary, no tracked file".to_string(), 0)] {
        let p = path(total, b);
        let carried: &[AmbientFile] = if b == 0 { &[] } else { &files };
        let (times, sent) = time(&p, carried, runs);
        let at = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
        report.push_str(&format!(
            "| {label} | {sent} | {} | {} | {} |\n",
            ms(at(0.5)),
            ms(at(0.99)),
            ms(times[times.len() - 1])
        ));
    }
    print!("{report}");
    let out = std::path::Path::new("bench/results");
    if std::fs::create_dir_all(out).is_ok() {
        let _ = std::fs::write(out.join("arbor-context.md"), &report);
    }
}
