//! The walk from a path's leaf towards its root that decides what of the path the model is
//! sent: boundaries (summary, clear, `/clearblobs`) and finished tasks. Shared by the context
//! renderer, compaction, tasks and the files in context.

use crate::domain::sessions::tree::{Message, MessageKind};

/// What of a path the model is sent, from [`window`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Window {
    /// The index of the first message sent.
    pub start: usize,
    /// Files attached to messages from this index on are sent (a `/clearblobs` keeps the
    /// files before it out).
    pub files_from: usize,
    /// Finished tasks after `start`, oldest first: (index of the task's start, index of its
    /// end). What lies between is not sent; the end is sent as the task's summary.
    pub tasks: Vec<(usize, usize)>,
}

impl Window {
    /// Whether the message at `i` is sent (as itself, or as a task's summary).
    pub fn sends(&self, i: usize) -> bool {
        i >= self.start && !self.tasks.iter().any(|&(s, e)| s <= i && i < e)
    }
}

/// What of `path` the model is sent. Walking from the leaf towards the root: a finished task
/// (its end, then back to its start, tasks nesting) is passed over whole and stands as its
/// summary; the nearest summary (sent, as the first message) or clear (not sent) ends the walk.
/// One pass over the path.
pub fn window(path: &[Message]) -> Window {
    let mut files_from: Option<usize> = None;
    let mut tasks = Vec::new();
    let mut i = path.len();
    let start = loop {
        if i == 0 {
            break 0;
        }
        i -= 1;
        match path[i].kind {
            MessageKind::Summary => break i,
            MessageKind::Clear => break i + 1,
            MessageKind::ClearFiles => {
                files_from.get_or_insert(i + 1);
            }
            MessageKind::TaskEnd => {
                let end = i;
                let mut depth = 1usize;
                while depth > 0 && i > 0 {
                    i -= 1;
                    match path[i].kind {
                        MessageKind::TaskEnd => depth += 1,
                        MessageKind::TaskStart => depth -= 1,
                        _ => {}
                    }
                }
                if depth > 0 {
                    // An end without its start (a hand-edited database): it stands alone.
                    break end;
                }
                tasks.push((i, end));
            }
            MessageKind::Text | MessageKind::ToolCall | MessageKind::ToolResult | MessageKind::TaskStart => {}
        }
    };
    tasks.reverse();
    Window { start, files_from: files_from.unwrap_or(start).max(start), tasks }
}

/// Where the task starting at `start` ends on `path`, if it has ended there.
pub fn finished_task_end(path: &[Message], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, m) in path.iter().enumerate().skip(start) {
        match m.kind {
            MessageKind::TaskStart => depth += 1,
            MessageKind::TaskEnd => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The tasks open at the end of `path` (their starts' indexes, outermost first).
pub fn open_tasks(path: &[Message]) -> Vec<usize> {
    let mut open = Vec::new();
    for (i, m) in path.iter().enumerate() {
        match m.kind {
            MessageKind::TaskStart => open.push(i),
            MessageKind::TaskEnd => {
                open.pop();
            }
            _ => {}
        }
    }
    open
}
