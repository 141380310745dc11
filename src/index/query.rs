//! What a person types into the search box, and the Tantivy query built from it.
//!
//! The text is parsed here, by hand, into words, phrases, exclusions and a few filters; it never
//! goes through Tantivy's `QueryParser`, so `user_id:…`, `+owner:*` or `*` are only text. The
//! query always starts with a required term on the owner's id, built by the server.

use std::ops::Bound;

use chrono::NaiveDate;
use tantivy::Term;
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, RangeQuery, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::tokenizer::TextAnalyzer;
use uuid::Uuid;

use super::phrase::Phrase;
use super::schema::{Fields, id_term};

/// At most this many words, phrases and exclusions are used; the rest are ignored, which bounds
/// the cost of one query.
const MAX_ITEMS: usize = 32;

/// At most this many tokens of one phrase (or one word that splits into several) are used.
const MAX_PHRASE_TOKENS: usize = 32;

/// Only this much of what was typed is read.
const MAX_INPUT_BYTES: usize = 2048;

const BAD_DATE: &str = "Dates in after: and before: are written like 2025-01-31.";
const EMPTY: &str = "Type a word to search for.";

/// A parsed user query.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchQuery {
    /// Words that must all appear (in the message or its session's title).
    pub words: Vec<String>,
    /// Phrases (typed in double quotes) that must appear word for word.
    pub phrases: Vec<String>,
    /// Words or phrases (typed with a leading `-`) that must not appear.
    pub excluded: Vec<String>,
    /// Only this workspace (chosen in the UI, never from the text).
    pub workspace: Option<Uuid>,
    /// Only messages of this role (`role:user|assistant|tool`).
    pub role: Option<String>,
    /// Only messages written on or after this day, UTC (`after:YYYY-MM-DD`).
    pub after: Option<NaiveDate>,
    /// Only messages written before this day, UTC (`before:YYYY-MM-DD`, the day itself excluded).
    pub before: Option<NaiveDate>,
    /// Only messages with an attachment (`has:attachment`).
    pub has_attachment: bool,
}

/// A filter recognised in the text.
enum Filter {
    Role(&'static str),
    After(NaiveDate),
    Before(NaiveDate),
    HasAttachment,
}

/// `Ok(None)` when `item` is not one of the known filters: it is then searched as text.
fn parse_filter(item: &str) -> Result<Option<Filter>, String> {
    let Some((key, value)) = item.split_once(':') else {
        return Ok(None);
    };
    let date = || NaiveDate::parse_from_str(value, "%Y-%m-%d").map_err(|_| BAD_DATE.to_string());
    Ok(match key.to_ascii_lowercase().as_str() {
        "role" => match value.to_ascii_lowercase().as_str() {
            "user" => Some(Filter::Role("user")),
            "assistant" => Some(Filter::Role("assistant")),
            "tool" => Some(Filter::Role("tool")),
            _ => None,
        },
        "after" => Some(Filter::After(date()?)),
        "before" => Some(Filter::Before(date()?)),
        "has" if value.eq_ignore_ascii_case("attachment") || value.eq_ignore_ascii_case("attachments") => {
            Some(Filter::HasAttachment)
        }
        _ => None,
    })
}

impl SearchQuery {
    /// Parses what a person typed: words, "quoted phrases", -excluded words (or -"phrases"), and
    /// the filters `role:user|assistant|tool`, `after:YYYY-MM-DD`, `before:YYYY-MM-DD` and
    /// `has:attachment` (a repeated filter: the last one wins). Any other `field:value` is searched
    /// as plain words, and `*`, `+`, `(`, `OR` and other query syntax are just text. An unclosed
    /// quote runs to the end. The workspace comes from the UI, not the text.
    ///
    /// Returns `Err` with a message safe to show (it never repeats the input) for a bad date or
    /// when nothing is left to search for.
    pub fn parse(text: &str, workspace: Option<Uuid>) -> Result<SearchQuery, String> {
        let mut q = SearchQuery { workspace, ..SearchQuery::default() };
        let mut rest = super::schema::truncate(text, MAX_INPUT_BYTES).trim_start();
        let mut items = 0;
        while !rest.is_empty() {
            // A lone `-` is a word; `-x` and `-"x y"` are exclusions.
            let (negated, body) = match rest.strip_prefix('-') {
                Some(b) if b.starts_with(|c: char| !c.is_whitespace()) => (true, b),
                _ => (false, rest),
            };
            let (item, quoted, after) = match body.strip_prefix('"') {
                Some(b) => match b.find('"') {
                    Some(end) => (&b[..end], true, &b[end + 1..]),
                    None => (b, true, ""),
                },
                None => {
                    let end = body.find(char::is_whitespace).unwrap_or(body.len());
                    (&body[..end], false, &body[end..])
                }
            };
            rest = after.trim_start();
            let item_text = item.trim();
            if item_text.is_empty() {
                continue;
            }
            if !quoted && !negated {
                match parse_filter(item_text)? {
                    Some(Filter::Role(r)) => q.role = Some(r.to_string()),
                    Some(Filter::After(d)) => q.after = Some(d),
                    Some(Filter::Before(d)) => q.before = Some(d),
                    Some(Filter::HasAttachment) => q.has_attachment = true,
                    None if items < MAX_ITEMS => {
                        items += 1;
                        q.words.push(item_text.to_string());
                    }
                    None => {}
                }
                continue;
            }
            if items >= MAX_ITEMS {
                continue;
            }
            items += 1;
            if negated {
                q.excluded.push(item_text.to_string());
            } else {
                q.phrases.push(item_text.to_string());
            }
        }
        let empty = q.words.is_empty()
            && q.phrases.is_empty()
            && q.excluded.is_empty()
            && q.role.is_none()
            && q.after.is_none()
            && q.before.is_none()
            && !q.has_attachment;
        if empty { Err(EMPTY.to_string()) } else { Ok(q) }
    }
}

/// The Tantivy queries for one search.
pub(super) struct Built {
    /// The whole query: owner, filters, text.
    pub query: BooleanQuery,
    /// Only the positive clauses on the message text, for highlighting; `None` for a search by
    /// filters alone.
    pub highlight: Option<BooleanQuery>,
}

/// Tokens of `text` with their positions, as the index saw them.
fn tokenize(analyzer: &mut TextAnalyzer, text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while out.len() < MAX_PHRASE_TOKENS
        && let Some(t) = stream.next()
    {
        out.push((t.position, t.text.clone()));
    }
    out
}

/// A term for one token, a phrase for several (keeping their relative positions). `tokens` is
/// never empty.
fn field_clause(field: Field, tokens: &[(usize, String)]) -> Box<dyn Query> {
    match tokens {
        [(_, t)] => Box::new(TermQuery::new(Term::from_field_text(field, t), IndexRecordOption::WithFreqs)),
        _ => {
            let first = tokens.first().map_or(0, |(p, _)| *p);
            let offset = |p: usize| u32::try_from(p - first).unwrap_or(u32::MAX);
            Box::new(Phrase::new(
                tokens.iter().map(|(p, t)| (offset(*p), Term::from_field_text(field, t))).collect(),
            ))
        }
    }
}

/// A clause that only filters: it adds nothing to the score.
fn filter(q: Box<dyn Query>) -> (Occur, Box<dyn Query>) {
    (Occur::Must, Box::new(ConstScoreQuery::new(q, 0.0)))
}

fn exact(term: Term) -> Box<dyn Query> {
    Box::new(TermQuery::new(term, IndexRecordOption::Basic))
}

fn day_start_micros(d: NaiveDate) -> i64 {
    d.and_hms_opt(0, 0, 0).map_or(i64::MIN, |t| t.and_utc().timestamp_micros())
}

/// Builds the query for `user_id`, or `None` when it cannot match anything (text that has no
/// searchable token, such as `*`, or an empty date range).
pub(super) fn build(
    q: &SearchQuery,
    user_id: Uuid,
    shared: &[Uuid],
    f: &Fields,
    analyzer: &mut TextAnalyzer,
) -> Option<Built> {
    // The owner clause comes first and is built here, from the server's user id only, and the
    // workspaces shared with them that the domain checked.
    let owner = exact(id_term(f.user_id, user_id));
    let scope: Box<dyn Query> = if shared.is_empty() {
        owner
    } else {
        let mut any = vec![(Occur::Should, owner)];
        any.extend(shared.iter().map(|w| (Occur::Should, exact(id_term(f.workspace_id, *w)))));
        Box::new(BooleanQuery::new(any))
    };
    let mut clauses = vec![filter(scope)];
    if let Some(ws) = q.workspace {
        clauses.push(filter(exact(id_term(f.workspace_id, ws))));
    }
    if let Some(role) = &q.role {
        clauses.push(filter(exact(Term::from_field_text(f.role, role))));
    }
    if q.has_attachment {
        clauses.push(filter(exact(Term::from_field_bool(f.has_attachment, true))));
    }
    let lower = q.after.map(day_start_micros);
    let upper = q.before.map(day_start_micros);
    if let (Some(l), Some(u)) = (lower, upper)
        && l >= u
    {
        return None;
    }
    if lower.is_some() || upper.is_some() {
        let bound = |v: Option<i64>, inclusive: bool| match v {
            Some(v) if inclusive => Bound::Included(Term::from_field_i64(f.created_at, v)),
            Some(v) => Bound::Excluded(Term::from_field_i64(f.created_at, v)),
            None => Bound::Unbounded,
        };
        clauses.push(filter(Box::new(RangeQuery::new(bound(lower, true), bound(upper, false)))));
    }

    let mut highlight = Vec::new();
    let mut positive = 0;
    for item in q.words.iter().chain(&q.phrases) {
        let tokens = tokenize(analyzer, item);
        if tokens.is_empty() {
            continue;
        }
        positive += 1;
        highlight.push((Occur::Should, field_clause(f.text, &tokens)));
        clauses.push((Occur::Must, field_clause(f.text, &tokens)));
    }
    if positive == 0 && !(q.words.is_empty() && q.phrases.is_empty()) {
        // Text was typed but none of it is searchable: match nothing rather than everything.
        return None;
    }
    for item in &q.excluded {
        let tokens = tokenize(analyzer, item);
        if !tokens.is_empty() {
            clauses.push((Occur::MustNot, field_clause(f.text, &tokens)));
        }
    }
    Some(Built {
        query: BooleanQuery::new(clauses),
        highlight: (!highlight.is_empty()).then(|| BooleanQuery::new(highlight)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> SearchQuery {
        SearchQuery::parse(s, None).unwrap()
    }

    #[test]
    fn words_phrases_and_exclusions() {
        let q = parse(r#"  alpha "big cat" -dog -"red fox" beta "#);
        assert_eq!(q.words, ["alpha", "beta"]);
        assert_eq!(q.phrases, ["big cat"]);
        assert_eq!(q.excluded, ["dog", "red fox"]);
        assert!(q.role.is_none() && q.after.is_none() && !q.has_attachment);
    }

    #[test]
    fn filters() {
        let q = parse("Role:Assistant after:2024-02-01 before:2024-03-01 has:attachment x");
        assert_eq!(q.role.as_deref(), Some("assistant"));
        assert_eq!(q.after, NaiveDate::from_ymd_opt(2024, 2, 1));
        assert_eq!(q.before, NaiveDate::from_ymd_opt(2024, 3, 1));
        assert!(q.has_attachment);
        assert_eq!(q.words, ["x"]);
        // Filters alone are a valid search.
        assert!(SearchQuery::parse("role:tool", None).is_ok());
    }

    #[test]
    fn unknown_fields_and_syntax_are_text() {
        let q = parse(r#"user_id:abc +owner:* * role:admin has:cake needle AND ( OR"#);
        assert_eq!(
            q.words,
            ["user_id:abc", "+owner:*", "*", "role:admin", "has:cake", "needle", "AND", "(", "OR"]
        );
        assert!(q.role.is_none() && !q.has_attachment);
        let q = parse(r#""needle" OR user_id:x"#);
        assert_eq!(q.phrases, ["needle"]);
        assert_eq!(q.words, ["OR", "user_id:x"]);
    }

    #[test]
    fn odd_quotes_and_dashes() {
        let q = parse(r#"a "unclosed phrase"#);
        assert_eq!(q.words, ["a"]);
        assert_eq!(q.phrases, ["unclosed phrase"]);
        let q = parse(r#"- x-y "" -"#);
        assert_eq!(q.words, ["-", "x-y", "-"]);
        assert!(q.phrases.is_empty());
    }

    #[test]
    fn errors_are_fixed_messages() {
        let e = SearchQuery::parse("after:2024-13-01 <b>", None).unwrap_err();
        assert_eq!(e, BAD_DATE);
        assert_eq!(SearchQuery::parse("before:yesterday", None).unwrap_err(), BAD_DATE);
        assert_eq!(SearchQuery::parse("   ", None).unwrap_err(), EMPTY);
        assert_eq!(SearchQuery::parse(r#""""#, None).unwrap_err(), EMPTY);
    }

    #[test]
    fn workspace_comes_from_the_caller() {
        let ws = Uuid::new_v4();
        let q = SearchQuery::parse("x workspace:abc", Some(ws)).unwrap();
        assert_eq!(q.workspace, Some(ws));
        assert_eq!(q.words, ["x", "workspace:abc"]);
    }

    #[test]
    fn items_are_capped() {
        let text: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
        let q = parse(&format!("{} role:user", text.join(" ")));
        assert_eq!(q.words.len(), MAX_ITEMS);
        assert_eq!(q.role.as_deref(), Some("user"));
        assert!(SearchQuery::parse(&"é".repeat(5000), None).is_ok());
    }
}
