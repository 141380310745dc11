//! Context rendering benchmark: the time to turn a long path into one provider request
//! (target: under 5 ms for a 5,000-message path with 20 boundaries).
//!
//! ```sh
//! cargo bench --bench context -- [--messages 5000] [--boundaries 20] [--runs 200]
//! ```
//!
//! Builds a path in memory, root first: question/answer turns where every third answer calls a
//! tool whose result is 20,000 characters (so the cutting of old results is part of the work),
//! with `--boundaries` summaries spread evenly. It then renders the request for the path's last
//! question `--runs` times, as a reply does (`window` walks from the leaf to the nearest
//! boundary, `render` builds the messages from there), and once more for the same path without
//! boundaries (everything is sent). Results are printed as markdown and written to
//! `bench/results/arbor-context.md`.

use std::time::{Duration, Instant};

use arbor::config::ProviderKind;
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
        client_id: None,
        created_at: chrono::Utc::now(),
    }
}

fn path(total: usize, boundaries: usize) -> Vec<Message> {
    let every = if boundaries == 0 { usize::MAX } else { (total / (boundaries + 1)).max(1) };
    let mut out = Vec::with_capacity(total);
    let mut turn = 0;
    while out.len() + 1 < total {
        turn += 1;
        if out.len() / every > out.iter().filter(|m: &&Message| m.kind == MessageKind::Summary).count() {
            let text = format!("## Goals\nSummary {turn} of the work so far.\n## Next steps\nStep {turn}.");
            out.push(message(Role::System, MessageKind::Summary, vec![Part::Text { text }]));
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
                    arguments: serde_json::json!({ "path": format!("src/step_{turn}.rs") }),
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

fn time(path: &[Message], runs: usize) -> (Vec<Duration>, usize) {
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
    for (label, b) in [(format!("{boundaries} summaries"), boundaries), ("no boundary".to_string(), 0)] {
        let p = path(total, b);
        let (times, sent) = time(&p, runs);
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
