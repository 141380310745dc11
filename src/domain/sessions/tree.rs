//! The conversation tree: messages linked by `parent_id`, the active path following
//! `chosen_child_id` from the session's active root.

use foldhash::{HashMap, HashMapExt, HashSet};
use serde::Serialize;
use uuid::Uuid;

pub use crate::model::messages::{Message, MessageKind, MessageStatus, MessageUsage, Role};

impl MessageUsage {
    /// A provider's counts for one call, priced with the model's catalog entry.
    pub fn priced(
        u: &crate::providers::types::Usage,
        info: &crate::providers::catalog::ModelInfo,
        estimated: bool,
    ) -> MessageUsage {
        MessageUsage {
            input: u.input_tokens,
            output: u.output_tokens,
            cached: u.cached_input_tokens,
            cost_micros: info.cost_micros(u.input_tokens, u.output_tokens, u.cached_input_tokens),
            estimated,
        }
    }

    /// Two usages together: counts summed; the cost known only when both are; estimated when
    /// either is.
    pub fn plus(self, other: MessageUsage) -> MessageUsage {
        MessageUsage {
            input: self.input.saturating_add(other.input),
            output: self.output.saturating_add(other.output),
            cached: self.cached.saturating_add(other.cached),
            cost_micros: self.cost_micros.zip(other.cost_micros).map(|(a, b)| a.saturating_add(b)),
            estimated: self.estimated || other.estimated,
        }
    }

    /// The usage of these messages together, as [`MessageUsage::plus`] adds them; nothing
    /// used costs nothing.
    pub fn total<'m>(messages: impl IntoIterator<Item = &'m Message>) -> MessageUsage {
        let none = MessageUsage { cost_micros: Some(0), ..MessageUsage::default() };
        messages.into_iter().filter_map(|m| m.usage).fold(none, MessageUsage::plus)
    }
}

/// An index over one session's messages: children in creation order, for walking the tree
/// without rescanning the whole list at every step.
pub struct TreeIndex<'a> {
    by_id: HashMap<Uuid, &'a Message>,
    children: HashMap<Option<Uuid>, Vec<&'a Message>>,
}

impl<'a> TreeIndex<'a> {
    /// Indexes the messages (any order).
    pub fn new(messages: &'a [Message]) -> TreeIndex<'a> {
        let by_id = messages.iter().map(|m| (m.id, m)).collect::<HashMap<_, _>>();
        let mut children: HashMap<Option<Uuid>, Vec<&Message>> = HashMap::with_capacity(messages.len());
        for m in messages {
            // A parent that is missing (corrupt data) makes its children unreachable, not roots.
            children.entry(m.parent_id).or_default().push(m);
        }
        for list in children.values_mut() {
            list.sort_by_key(|m| (m.created_at, m.id));
        }
        TreeIndex { by_id, children }
    }

    /// The message with this id.
    pub fn get(&self, id: Uuid) -> Option<&'a Message> {
        self.by_id.get(&id).copied()
    }

    /// Children of `parent` (roots for `None`), oldest first.
    pub fn children(&self, parent: Option<Uuid>) -> &[&'a Message] {
        self.children.get(&parent).map_or(&[], Vec::as_slice)
    }

    /// The child the active path follows from `parent`: the chosen one, else the newest.
    fn next_after(&self, parent: Option<Uuid>, chosen: Option<Uuid>) -> Option<&'a Message> {
        // A message that chose itself ends the path there ("Continue from here").
        if parent.is_some() && chosen == parent {
            return None;
        }
        let kids = self.children(parent);
        chosen.and_then(|c| kids.iter().find(|m| m.id == c)).or_else(|| kids.last()).copied()
    }

    /// The active path from `root`: follow `chosen_child_id` (or the newest child when unset).
    pub fn active_path(&self, root: Option<Uuid>) -> Vec<&'a Message> {
        let mut path = Vec::new();
        let mut next = self.next_after(None, root);
        while let Some(m) = next {
            // A cycle can only come from corrupt data; stop rather than loop forever.
            if path.len() > self.by_id.len() {
                break;
            }
            path.push(m);
            next = self.next_after(Some(m.id), m.chosen_child_id);
        }
        path
    }

    /// The path from the root down to `id` (inclusive), following parents.
    pub fn path_to(&self, id: Uuid) -> Vec<&'a Message> {
        let mut out = Vec::new();
        let mut next = Some(id);
        while let Some(current) = next {
            if out.len() > self.by_id.len() {
                break;
            }
            let Some(m) = self.get(current) else { break };
            out.push(m);
            next = m.parent_id;
        }
        out.reverse();
        out
    }

    /// Where a message stands among its siblings.
    pub fn siblings(&self, id: Uuid) -> Option<Siblings> {
        let m = self.get(id)?;
        let kids = self.children(m.parent_id);
        let index = kids.iter().position(|k| k.id == id)?;
        Some(Siblings {
            position: index + 1,
            count: kids.len(),
            previous: index.checked_sub(1).map(|i| kids[i].id),
            next: kids.get(index + 1).map(|k| k.id),
        })
    }

    /// The message and everything below it, the message first.
    pub fn subtree(&self, id: Uuid) -> Vec<Uuid> {
        let mut out = Vec::new();
        let mut stack = vec![id];
        while let Some(current) = stack.pop() {
            if out.len() > self.by_id.len() {
                break;
            }
            out.push(current);
            stack.extend(self.children(Some(current)).iter().rev().map(|m| m.id));
        }
        out
    }

    /// How many messages each message's branch holds (itself and everything below), for all
    /// messages in one pass.
    pub fn branch_sizes(&self) -> HashMap<Uuid, usize> {
        let mut order = Vec::with_capacity(self.by_id.len());
        let mut stack: Vec<&Message> = self.children(None).to_vec();
        while let Some(m) = stack.pop() {
            if order.len() > self.by_id.len() {
                break;
            }
            order.push(m);
            stack.extend(self.children(Some(m.id)).iter().copied());
        }
        let mut sizes: HashMap<Uuid, usize> = HashMap::with_capacity(order.len());
        // Children come after their parent in `order`, so walking it backwards sums bottom-up.
        for m in order.iter().rev() {
            let below: usize =
                self.children(Some(m.id)).iter().map(|c| sizes.get(&c.id).copied().unwrap_or(0)).sum();
            sizes.insert(m.id, below + 1);
        }
        sizes
    }

    /// The whole tree for drawing, compactly: one row per unbranched stretch of messages, each
    /// row indented by how many forks lie above it; `path` is highlighted.
    pub fn overview(&self, path: &[Uuid]) -> Vec<OverviewRow> {
        let on_path: HashSet<Uuid> = path.iter().copied().collect();
        let leaf = path.last().copied();
        let dot = |m: &Message| {
            let label: String =
                m.text().split_whitespace().collect::<Vec<_>>().join(" ").chars().take(60).collect();
            OverviewDot {
                id: m.id,
                role: m.role.as_str(),
                label,
                on_path: on_path.contains(&m.id),
                is_leaf: leaf == Some(m.id),
                task: None,
                closes: 0,
            }
        };
        let mut rows = Vec::new();
        // (first message of a stretch, its fork depth); a stack keeps deep trees off the call stack.
        let mut stack: Vec<(&Message, usize)> = self.children(None).iter().rev().map(|m| (*m, 0)).collect();
        let mut seen = 0usize;
        while let Some((first, depth)) = stack.pop() {
            let mut dots = Vec::new();
            let mut current = first;
            loop {
                seen += 1;
                if seen > self.by_id.len() {
                    return rows;
                }
                dots.push(dot(current));
                match self.children(Some(current.id)) {
                    [only] => current = only,
                    kids => {
                        stack.extend(kids.iter().rev().map(|k| (*k, depth + 1)));
                        break;
                    }
                }
            }
            let on_path = dots.iter().any(|d| d.on_path);
            rows.push(OverviewRow { depth, on_path, has_tasks: false, dots });
        }
        self.mark_tasks(&mut rows);
        rows
    }

    /// Tasks in the overview: each task start is marked open or done (some branch below it
    /// finished it), and within a row the dots of a task nest in a collapsible group, closed
    /// after its end (or at the row's end, when the task goes on in another row).
    fn mark_tasks(&self, rows: &mut [OverviewRow]) {
        let mut done = HashSet::default();
        for end in self.by_id.values().filter(|m| m.kind == MessageKind::TaskEnd) {
            let mut depth = 1usize;
            let mut at = end.parent_id.and_then(|p| self.get(p));
            let mut steps = 0usize;
            while let Some(m) = at {
                steps += 1;
                if steps > self.by_id.len() {
                    break;
                }
                match m.kind {
                    MessageKind::TaskEnd => depth += 1,
                    MessageKind::TaskStart => {
                        depth -= 1;
                        if depth == 0 {
                            done.insert(m.id);
                            break;
                        }
                    }
                    _ => {}
                }
                at = m.parent_id.and_then(|p| self.get(p));
            }
        }
        for row in rows {
            let mut open = 0usize;
            for i in 0..row.dots.len() {
                match self.get(row.dots[i].id).map(|m| m.kind) {
                    Some(MessageKind::TaskStart) => {
                        row.dots[i].task = Some(if done.contains(&row.dots[i].id) { "done" } else { "open" });
                        row.has_tasks = true;
                        open += 1;
                    }
                    Some(MessageKind::TaskEnd) if open > 0 => {
                        row.dots[i].closes += 1;
                        open -= 1;
                    }
                    _ => {}
                }
            }
            if let Some(last) = row.dots.last_mut() {
                last.closes += open;
            }
        }
    }
}

/// A message's place among the children of its parent ("2 / 3").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Siblings {
    /// 1-based position.
    pub position: usize,
    /// How many siblings, itself included.
    pub count: usize,
    /// The sibling before it.
    pub previous: Option<Uuid>,
    /// The sibling after it.
    pub next: Option<Uuid>,
}

/// One unbranched stretch of the tree overview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverviewRow {
    /// How many forks lie above it.
    pub depth: usize,
    /// Whether the active path runs through it.
    pub on_path: bool,
    /// Whether a task starts in it (its dots then nest, and the row is never shortened).
    pub has_tasks: bool,
    /// Its messages, in order.
    pub dots: Vec<OverviewDot>,
}

/// One message in the tree overview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverviewDot {
    /// Message id.
    pub id: Uuid,
    /// `user` or `assistant`.
    pub role: &'static str,
    /// The start of its text.
    pub label: String,
    /// Whether it is on the active path.
    pub on_path: bool,
    /// Whether it is the active path's last message.
    pub is_leaf: bool,
    /// For a task's start: `open`, or `done` when a branch below it finished the task.
    pub task: Option<&'static str>,
    /// How many task groups close after it.
    pub closes: usize,
}

/// The active path: from `root` follow `chosen_child_id` (or the newest child when unset).
pub fn active_path(messages: &[Message], root: Option<Uuid>) -> Vec<Message> {
    TreeIndex::new(messages).active_path(root).into_iter().cloned().collect()
}

/// The path from the root down to `id` (inclusive), following parents.
pub fn path_to(messages: &[Message], id: Uuid) -> Vec<Message> {
    TreeIndex::new(messages).path_to(id).into_iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;
    use crate::providers::types::Part;

    fn msg(id: u128, parent: Option<u128>, chosen: Option<u128>, secs: i64) -> Message {
        Message {
            id: Uuid::from_u128(id),
            session_id: Uuid::nil(),
            parent_id: parent.map(Uuid::from_u128),
            chosen_child_id: chosen.map(Uuid::from_u128),
            role: Role::User,
            kind: crate::model::messages::MessageKind::Text,
            parts: vec![Part::Text { text: format!("m{id}") }],
            model: None,
            status: MessageStatus::Complete,
            error: None,
            usage: None,
            tokens: None,
            client_id: None,
            author_id: None,
            created_at: DateTime::from_timestamp(secs, 0).unwrap_or_default(),
        }
    }

    #[test]
    fn a_total_sums_every_usage_and_knows_the_cost_only_when_every_one_is_priced() {
        let used = |input: u64, cost: Option<i64>, estimated: bool| {
            let mut m = msg(input.into(), None, None, 1);
            m.usage =
                Some(MessageUsage { input, output: input / 2, cached: 1, cost_micros: cost, estimated });
            m
        };
        let none = MessageUsage::total(&[msg(1, None, None, 1)]);
        assert_eq!(none, MessageUsage { cost_micros: Some(0), ..MessageUsage::default() });
        let priced = [used(10, Some(5), false), msg(7, None, None, 1), used(20, Some(7), false)];
        let t = MessageUsage::total(&priced);
        assert_eq!((t.input, t.output, t.cached, t.cost_micros, t.estimated), (30, 15, 2, Some(12), false));
        let partly = [used(10, Some(5), false), used(20, None, true)];
        let t = MessageUsage::total(&partly);
        assert_eq!((t.input, t.cost_micros, t.estimated), (30, None, true));
        let huge = [used(u64::MAX, Some(i64::MAX), false), used(1, Some(1), false)];
        let t = MessageUsage::total(&huge);
        assert_eq!((t.input, t.cost_micros), (u64::MAX, Some(i64::MAX)));
    }

    #[test]
    fn the_active_path_follows_chosen_children() {
        // 1 -> {2, 3}; 1 chose 2; 2 -> 4; 3 -> 5.
        let all = vec![
            msg(1, None, Some(2), 1),
            msg(2, Some(1), Some(4), 2),
            msg(3, Some(1), None, 3),
            msg(4, Some(2), None, 4),
            msg(5, Some(3), None, 5),
        ];
        let ids: Vec<u128> =
            active_path(&all, Some(Uuid::from_u128(1))).iter().map(|m| m.id.as_u128()).collect();
        assert_eq!(ids, [1, 2, 4]);
        // Without a choice the newest child is followed.
        let mut unchosen = all.clone();
        unchosen[0].chosen_child_id = None;
        let ids: Vec<u128> = active_path(&unchosen, None).iter().map(|m| m.id.as_u128()).collect();
        assert_eq!(ids, [1, 3, 5]);
        let ids: Vec<u128> = path_to(&all, Uuid::from_u128(5)).iter().map(|m| m.id.as_u128()).collect();
        assert_eq!(ids, [1, 3, 5]);
    }

    fn ids(ms: &[&Message]) -> Vec<u128> {
        ms.iter().map(|m| m.id.as_u128()).collect()
    }

    #[test]
    fn siblings_subtrees_and_the_overview() {
        // 1 -> {2, 3}; 2 -> 4; 3 -> {5, 6}; 7 is a second root (an edited first message).
        let all = vec![
            msg(1, None, Some(3), 1),
            msg(2, Some(1), Some(4), 2),
            msg(3, Some(1), Some(5), 3),
            msg(4, Some(2), None, 4),
            msg(5, Some(3), None, 5),
            msg(6, Some(3), None, 6),
            msg(7, None, None, 7),
        ];
        let t = TreeIndex::new(&all);
        let s = t.siblings(Uuid::from_u128(3)).unwrap();
        assert_eq!((s.position, s.count), (2, 2));
        assert_eq!((s.previous, s.next), (Some(Uuid::from_u128(2)), None));
        let root = t.siblings(Uuid::from_u128(7)).unwrap();
        assert_eq!((root.position, root.count, root.previous), (2, 2, Some(Uuid::from_u128(1))));
        let sizes = t.branch_sizes();
        assert_eq!(
            (sizes[&Uuid::from_u128(1)], sizes[&Uuid::from_u128(3)], sizes[&Uuid::from_u128(7)]),
            (6, 3, 1)
        );
        let sub: Vec<u128> = t.subtree(Uuid::from_u128(3)).iter().map(|u| u.as_u128()).collect();
        assert_eq!(sub, [3, 5, 6]);
        assert_eq!(t.subtree(Uuid::from_u128(1)).len(), 6);
        // The active root is 1 when asked for; without one the newest root is followed.
        assert_eq!(ids(&t.active_path(Some(Uuid::from_u128(1)))), [1, 3, 5]);
        assert_eq!(ids(&t.active_path(None)), [7]);
        let path: Vec<Uuid> = t.active_path(Some(Uuid::from_u128(1))).iter().map(|m| m.id).collect();
        let rows = t.overview(&path);
        // 1 | 2 4 | 3 | 5 | 6 | 7: stretches split at forks, indented by the forks above.
        let shape: Vec<(usize, Vec<u128>)> =
            rows.iter().map(|r| (r.depth, r.dots.iter().map(|d| d.id.as_u128()).collect())).collect();
        assert_eq!(
            shape,
            [(0, vec![1]), (1, vec![2, 4]), (1, vec![3]), (2, vec![5]), (2, vec![6]), (0, vec![7])]
        );
        let on: Vec<bool> = rows.iter().map(|r| r.on_path).collect();
        assert_eq!(on, [true, false, true, true, false, false]);
        assert!(rows[3].dots[0].is_leaf && rows[3].dots[0].label == "m5");
    }

    #[test]
    fn the_overview_groups_tasks_and_knows_which_are_done() {
        use crate::model::messages::MessageKind::{TaskEnd, TaskStart};
        let kind = |mut m: Message, k| {
            m.kind = k;
            m
        };
        // 1 -> task 2 -> 3 -> end 4 -> 5, and a fork at 3: 6 -> task 7 (open) -> 8.
        let all = vec![
            msg(1, None, None, 1),
            kind(msg(2, Some(1), None, 2), TaskStart),
            msg(3, Some(2), Some(4), 3),
            kind(msg(4, Some(3), None, 4), TaskEnd),
            msg(5, Some(4), None, 5),
            msg(6, Some(3), None, 6),
            kind(msg(7, Some(6), None, 7), TaskStart),
            msg(8, Some(7), None, 8),
        ];
        let t = TreeIndex::new(&all);
        let rows = t.overview(&[]);
        let shape: Vec<Vec<(u128, Option<&str>, usize)>> = rows
            .iter()
            .map(|r| r.dots.iter().map(|d| (d.id.as_u128(), d.task, d.closes)).collect())
            .collect();
        assert_eq!(
            shape,
            [
                // The task's group stays open at the fork: it goes on in the rows below.
                vec![(1, None, 0), (2, Some("done"), 0), (3, None, 1)],
                vec![(4, None, 0), (5, None, 0)],
                vec![(6, None, 0), (7, Some("open"), 0), (8, None, 1)],
            ]
        );
        assert!(rows[0].has_tasks && !rows[1].has_tasks && rows[2].has_tasks);
    }

    #[test]
    fn deep_chains_are_walked_without_recursion() {
        let all: Vec<Message> =
            (1..=5000u128).map(|i| msg(i, (i > 1).then(|| i - 1), None, i as i64)).collect();
        let t = TreeIndex::new(&all);
        let path = t.active_path(None);
        assert_eq!(path.len(), 5000);
        assert_eq!(t.subtree(Uuid::from_u128(1)).len(), 5000);
        let ids: Vec<Uuid> = path.iter().map(|m| m.id).collect();
        let rows = t.overview(&ids);
        assert_eq!(rows.len(), 1, "one unbranched stretch");
        assert_eq!(rows[0].dots.len(), 5000);
        assert!(rows[0].dots[4999].is_leaf);
    }

    #[test]
    fn corrupt_cycles_do_not_hang() {
        let all = vec![msg(1, Some(2), Some(2), 1), msg(2, Some(1), Some(1), 2)];
        assert!(active_path(&all, Some(Uuid::from_u128(1))).len() <= 3);
        assert!(path_to(&all, Uuid::from_u128(1)).len() <= 3);
    }

    #[test]
    fn statuses_round_trip() {
        for s in ["complete", "streaming", "interrupted", "stopped", "error"] {
            assert_eq!(MessageStatus::parse(s).map(MessageStatus::as_str), Some(s));
        }
        assert!(MessageStatus::Interrupted.can_continue() && !MessageStatus::Complete.can_continue());
    }
}
