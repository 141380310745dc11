use chrono::{TimeZone, Utc};
use tantivy::doc;
use tantivy::schema::{STORED, TEXT};

use super::*;

/// Snippets as the web layer renders them, so these tests read as the page does.
impl SearchHit {
    fn snippet_html(&self) -> String {
        crate::web::escape::highlight(&self.snippet)
    }
}

fn render(text: &str, range: Range<usize>, marks: &[Range<usize>]) -> String {
    crate::web::escape::highlight(&piece(text, range, marks))
}
use crate::index::IndexDoc;

fn at(y: i32, m: u32, d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, h, 0, 0).unwrap()
}

fn doc(user: Uuid, text: &str) -> IndexDoc {
    IndexDoc {
        message_id: Uuid::now_v7(),
        user_id: user,
        workspace_id: Uuid::from_u128(1),
        session_id: Uuid::from_u128(2),
        role: "user".into(),
        created_at: at(2025, 1, 1, 12),
        has_attachment: false,
        text: text.into(),
        session_title: "A session".into(),
    }
}

fn upsert(index: &SearchIndex, docs: &[IndexDoc]) {
    index.apply(docs.iter().cloned().map(IndexOp::Upsert).collect()).unwrap();
}

fn search(index: &SearchIndex, user: Uuid, q: &str) -> SearchResults {
    index.search(user, &SearchQuery::parse(q, None).unwrap(), 0, 50).unwrap()
}

fn ids(r: &SearchResults) -> Vec<Uuid> {
    r.hits.iter().map(|h| h.message_id).collect()
}

fn sorted(mut v: Vec<Uuid>) -> Vec<Uuid> {
    v.sort();
    v
}

#[test]
fn each_user_sees_only_their_own_messages_whatever_they_type() {
    let index = SearchIndex::open_in_ram().unwrap();
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let da = doc(a, "a needle in A's haystack");
    let db = doc(b, "a needle in B's haystack");
    // B's text also holds the words that A's tricks would spell.
    let db2 = doc(b, &format!("user id {a} owner or x needle and"));
    upsert(&index, &[da.clone(), db.clone(), db2.clone()]);

    assert_eq!(ids(&search(&index, a, "needle")), [da.message_id]);
    assert_eq!(sorted(ids(&search(&index, b, "needle"))), sorted(vec![db.message_id, db2.message_id]));

    let tricks = [
        format!("user_id:{b}"),
        format!("user_id:{a}"),
        "user_id:A".to_string(),
        "+owner:*".to_string(),
        "*".to_string(),
        r#""needle" OR user_id:x"#.to_string(),
        "needle AND (".to_string(),
        "needle)".to_string(),
        "needle OR *:*".to_string(),
        "-user_id:x needle".to_string(),
        format!("session_id:{} needle", Uuid::from_u128(2)),
        "needle^100 ~2 \\".to_string(),
        "message_id:[* TO *]".to_string(),
    ];
    for t in &tricks {
        let q = SearchQuery::parse(t, None).unwrap();
        for (me, mine) in [(a, vec![da.message_id]), (b, vec![db.message_id, db2.message_id])] {
            let r = index.search(me, &q, 0, 50).unwrap();
            assert!(ids(&r).iter().all(|id| mine.contains(id)), "{t:?} leaked: {r:?}");
            assert_eq!(r.total, r.hits.len(), "{t:?}");
        }
    }
    // A user with no messages sees nothing, even for "*".
    assert_eq!(search(&index, Uuid::new_v4(), "needle").total, 0);
    assert_eq!(search(&index, Uuid::new_v4(), "*").total, 0);
}

#[test]
fn words_are_anded_phrases_are_exact_and_exclusions_exclude() {
    let index = SearchIndex::open_in_ram().unwrap();
    let u = Uuid::new_v4();
    let d1 = doc(u, "the quick brown fox jumps");
    let d2 = doc(u, "the brown quick dog sleeps");
    let d3 = doc(u, "a quick lunch");
    upsert(&index, &[d1.clone(), d2.clone(), d3.clone()]);

    assert_eq!(sorted(ids(&search(&index, u, "quick brown"))), sorted(vec![d1.message_id, d2.message_id]));
    assert_eq!(ids(&search(&index, u, r#""quick brown""#)), [d1.message_id]);
    assert_eq!(ids(&search(&index, u, r#""brown quick" dog"#)), [d2.message_id]);
    assert_eq!(sorted(ids(&search(&index, u, "quick -fox"))), sorted(vec![d2.message_id, d3.message_id]));
    assert_eq!(ids(&search(&index, u, r#"quick -"brown fox" -dog"#)), [d3.message_id]);
    // A word that splits into several tokens is a phrase.
    assert_eq!(ids(&search(&index, u, "quick-brown")), [d1.message_id]);
    // Exclusions alone: everything of mine but those.
    assert_eq!(ids(&search(&index, u, "-brown")), [d3.message_id]);
    assert_eq!(search(&index, u, "quick nowhere").total, 0);
}

#[test]
fn filters_role_dates_attachment_and_workspace() {
    let index = SearchIndex::open_in_ram().unwrap();
    let u = Uuid::new_v4();
    let ws = Uuid::new_v4();
    let mut d1 = doc(u, "report draft");
    d1.created_at = at(2024, 3, 1, 0);
    let mut d2 = doc(u, "report final");
    d2.role = "assistant".into();
    d2.created_at = at(2024, 3, 1, 23);
    d2.workspace_id = ws;
    let mut d3 = doc(u, "report tool output");
    d3.role = "tool".into();
    d3.created_at = at(2024, 3, 2, 0);
    d3.has_attachment = true;
    upsert(&index, &[d1.clone(), d2.clone(), d3.clone()]);

    assert_eq!(ids(&search(&index, u, "report role:assistant")), [d2.message_id]);
    assert_eq!(ids(&search(&index, u, "role:tool")), [d3.message_id]);
    assert_eq!(ids(&search(&index, u, "report has:attachment")), [d3.message_id]);
    // after: includes its day, before: excludes its day (UTC).
    assert_eq!(ids(&search(&index, u, "report after:2024-03-02")), [d3.message_id]);
    assert_eq!(
        sorted(ids(&search(&index, u, "report before:2024-03-02"))),
        sorted(vec![d1.message_id, d2.message_id])
    );
    assert_eq!(
        sorted(ids(&search(&index, u, "report after:2024-03-01 before:2024-03-02"))),
        sorted(vec![d1.message_id, d2.message_id])
    );
    assert_eq!(search(&index, u, "report after:2024-03-02 before:2024-03-02").total, 0);
    assert_eq!(search(&index, u, "report after:2030-01-01 before:2020-01-01").total, 0);
    // Filters alone list the newest first.
    assert_eq!(ids(&search(&index, u, "after:2024-01-01")), [d3.message_id, d2.message_id, d1.message_id]);

    let in_ws = SearchQuery::parse("report", Some(ws)).unwrap();
    assert_eq!(ids(&index.search(u, &in_ws, 0, 10).unwrap()), [d2.message_id]);
    let other_ws = SearchQuery::parse("report", Some(Uuid::new_v4())).unwrap();
    assert_eq!(index.search(u, &other_ws, 0, 10).unwrap().total, 0);
}

#[test]
fn hits_carry_their_fields() {
    let index = SearchIndex::open_in_ram().unwrap();
    let u = Uuid::new_v4();
    let mut d = doc(u, "hello world");
    d.role = "assistant".into();
    d.session_title = "Greetings".into();
    d.created_at = Utc.timestamp_micros(1_700_000_000_123_456).unwrap();
    upsert(&index, std::slice::from_ref(&d));
    let h = &search(&index, u, "hello").hits[0];
    assert_eq!((h.message_id, h.session_id, h.workspace_id), (d.message_id, d.session_id, d.workspace_id));
    assert_eq!(h.role, "assistant");
    assert_eq!(h.created_at, d.created_at);
    assert_eq!(h.session_title, "Greetings");
    assert_eq!(h.snippet_html(), "<mark>hello</mark> world");
    assert!(h.score > 0.0);
}

#[test]
fn ranking_is_bm25_then_newest_and_pages_are_exact() {
    let index = SearchIndex::open_in_ram().unwrap();
    let u = Uuid::new_v4();
    let mut docs = Vec::new();
    for i in 0..25u32 {
        let mut d = doc(u, "same words here");
        d.created_at = at(2025, 1, 1, 0) + chrono::Duration::minutes(i.into());
        docs.push(d);
    }
    let mut best = doc(u, "words words words");
    best.created_at = at(2000, 1, 1, 0);
    docs.push(best.clone());
    upsert(&index, &docs);

    let q = SearchQuery::parse("words", None).unwrap();
    let mut seen = Vec::new();
    for page in 0..3 {
        let r = index.search(u, &q, page * 10, 10).unwrap();
        assert_eq!(r.total, 26);
        seen.extend(r.hits);
    }
    assert_eq!(seen.len(), 26);
    assert_eq!(seen[0].message_id, best.message_id, "higher term frequency first");
    // Equal scores: newest first.
    let rest: Vec<_> = seen[1..].iter().map(|h| h.created_at).collect();
    assert!(rest.windows(2).all(|w| w[0] > w[1]), "{rest:?}");
    assert!(seen[1..].iter().all(|h| h.score == seen[1].score));

    // Limits: counts only, capped pages, far offsets.
    let r = index.search(u, &q, 0, 0).unwrap();
    assert_eq!((r.total, r.hits.len()), (26, 0));
    assert_eq!(index.search(u, &q, 0, 10_000).unwrap().hits.len(), 26);
    let r = index.search(u, &q, usize::MAX, usize::MAX).unwrap();
    assert_eq!((r.total, r.hits.len()), (26, 0));
    assert_eq!(index.search(u, &q, 25, 10).unwrap().hits.len(), 1);
}

#[test]
fn upsert_replaces_and_deletes_remove() {
    let index = SearchIndex::open_in_ram().unwrap();
    let (u, other) = (Uuid::new_v4(), Uuid::new_v4());
    let mut d1 = doc(u, "original text");
    let mut d2 = doc(u, "second original");
    d2.session_id = Uuid::new_v4();
    let d3 = doc(u, "third original");
    let d4 = doc(other, "original of someone else");
    upsert(&index, &[d1.clone(), d2.clone(), d3.clone(), d4.clone()]);
    assert_eq!(search(&index, u, "original").total, 3);

    // Edit: the old text is gone, the new one found, still one document.
    d1.text = "edited text".into();
    upsert(&index, std::slice::from_ref(&d1));
    assert_eq!(ids(&search(&index, u, "edited")), [d1.message_id]);
    assert_eq!(search(&index, u, "original").total, 2);
    assert_eq!(index.num_docs(), 4);

    // Two versions in one batch: the last wins.
    let mut v2 = d1.clone();
    v2.text = "v2".into();
    let mut v3 = d1.clone();
    v3.text = "v3".into();
    upsert(&index, &[v2, v3]);
    assert_eq!(search(&index, u, "v2").total, 0);
    assert_eq!(search(&index, u, "v3").total, 1);

    index.apply(vec![IndexOp::DeleteMessage(d3.message_id)]).unwrap();
    assert_eq!(ids(&search(&index, u, "original")), [d2.message_id]);

    index.apply(vec![IndexOp::DeleteSession(d2.session_id)]).unwrap();
    assert_eq!(search(&index, u, "original").total, 0);
    assert_eq!(search(&index, u, "v3").total, 1, "other sessions stay");

    index.apply(vec![IndexOp::DeleteUser(u)]).unwrap();
    assert_eq!(search(&index, u, "v3").total, 0);
    assert_eq!(ids(&search(&index, other, "original")), [d4.message_id]);

    // A delete followed by an upsert in one batch keeps the new document.
    let mut d5 = doc(other, "fresh");
    d5.session_id = d4.session_id;
    index.apply(vec![IndexOp::DeleteSession(d4.session_id), IndexOp::Upsert(d5.clone())]).unwrap();
    assert_eq!(ids(&search(&index, other, "fresh")), [d5.message_id]);
    assert_eq!(search(&index, other, "original").total, 0);

    index.clear().unwrap();
    assert_eq!(index.num_docs(), 0);
    upsert(&index, std::slice::from_ref(&d5));
    assert_eq!(index.num_docs(), 1, "the writer still works after clear");
}

#[test]
fn snippets_escape_html_and_mark_only_matches() {
    let index = SearchIndex::open_in_ram().unwrap();
    let u = Uuid::new_v4();
    let d = doc(u, r#"Use <script>alert("x & y")</script> to test 'quotes' & script"#);
    upsert(&index, std::slice::from_ref(&d));
    let h = &search(&index, u, "script").hits[0];
    assert_eq!(
        h.snippet_html(),
        "Use &lt;<mark>script</mark>&gt;alert(&quot;x &amp; y&quot;)&lt;/<mark>script</mark>&gt; to test \
         &#39;quotes&#39; &amp; <mark>script</mark>"
    );
    // Apart from the marks, no tag survives.
    let without_marks = h.snippet_html().replace("<mark>", "").replace("</mark>", "");
    assert!(!without_marks.contains('<') && !without_marks.contains('>'));
}

#[test]
fn snippets_of_long_text_are_cut_with_ellipses_and_fall_back_to_the_start() {
    let index = SearchIndex::open_in_ram().unwrap();
    let u = Uuid::new_v4();
    let long = format!("{} target {}", "lorem ipsum ".repeat(100), "dolor sit ".repeat(100));
    let mut d = doc(u, &long);
    d.session_title = "Title word".into();
    upsert(&index, std::slice::from_ref(&d));
    let s = &search(&index, u, "target").hits[0].snippet_html();
    assert!(s.starts_with('…') && s.ends_with('…') && s.contains("<mark>target</mark>"), "{s}");
    assert!(s.len() < 300, "{s}");
    // A match in the title only: the start of the text, unmarked.
    let s = &search(&index, u, "title").hits[0].snippet_html();
    assert!(s.starts_with("lorem ipsum") && s.ends_with('…') && !s.contains("<mark>"), "{s}");
    // Filters only: the start too.
    let s = &search(&index, u, "role:user").hits[0].snippet_html();
    assert!(s.starts_with("lorem ipsum"));
}

#[test]
fn accents_and_case_are_folded() {
    let index = SearchIndex::open_in_ram().unwrap();
    let u = Uuid::new_v4();
    let d1 = doc(u, "Le CAFÉ est fermé");
    let d2 = doc(u, "the cafe is closed; Müller über Straße");
    upsert(&index, &[d1.clone(), d2.clone()]);
    assert_eq!(search(&index, u, "cafe").total, 2);
    assert_eq!(search(&index, u, "Café").total, 2);
    assert_eq!(ids(&search(&index, u, "ferme")), [d1.message_id]);
    assert_eq!(ids(&search(&index, u, "muller uber")), [d2.message_id]);
    assert_eq!(ids(&search(&index, u, r#""le cafe""#)), [d1.message_id]);
    let h = &search(&index, u, "fermé").hits[0];
    assert_eq!(h.snippet_html(), "Le CAFÉ est <mark>fermé</mark>");
}

#[test]
fn the_title_is_searched_too_but_no_phrase_spans_title_and_text() {
    let index = SearchIndex::open_in_ram().unwrap();
    let u = Uuid::new_v4();
    let mut in_title = doc(u, "nothing here");
    in_title.session_title = "Kubernetes notes".into();
    let in_text = doc(u, "kubernetes pods");
    upsert(&index, &[in_title.clone(), in_text.clone()]);
    assert_eq!(
        sorted(ids(&search(&index, u, "kubernetes"))),
        sorted(vec![in_text.message_id, in_title.message_id])
    );
    assert_eq!(ids(&search(&index, u, "kubernetes notes")), [in_title.message_id]);
    assert_eq!(ids(&search(&index, u, r#""kubernetes notes""#)), [in_title.message_id]);
    assert_eq!(search(&index, u, r#""here kubernetes""#).total, 0);
    assert_eq!(ids(&search(&index, u, "kubernetes -notes")), [in_text.message_id]);
}

#[test]
fn empty_text_and_title_are_fine() {
    let index = SearchIndex::open_in_ram().unwrap();
    let u = Uuid::new_v4();
    let mut d = doc(u, "");
    d.session_title = String::new();
    d.role = "tool".into();
    upsert(&index, std::slice::from_ref(&d));
    let r = search(&index, u, "role:tool");
    assert_eq!(ids(&r), [d.message_id]);
    assert_eq!((r.hits[0].snippet_html().as_str(), r.hits[0].session_title.as_str()), ("", ""));
}

#[test]
fn very_long_text_is_searchable_past_the_stored_cap() {
    let index = SearchIndex::open_in_ram().unwrap();
    let u = Uuid::new_v4();
    let text = format!("{} needle", "word ".repeat(schema::MAX_STORED_TEXT / 5 + 10));
    upsert(&index, &[doc(u, &text)]);
    let r = search(&index, u, "needle");
    assert_eq!(r.total, 1);
    assert!(r.hits[0].snippet_html().starts_with("word word"));
}

#[test]
fn reopening_keeps_committed_documents_and_drops_uncommitted_ones() {
    let dir = tempfile::tempdir().unwrap();
    let u = Uuid::new_v4();
    let kept = doc(u, "committed");
    {
        let (index, fresh) = SearchIndex::open(dir.path()).unwrap();
        assert!(fresh, "a new index must be filled from the database");
        upsert(&index, std::slice::from_ref(&kept));
        // Another open while this one holds the writer fails rather than sharing it.
        assert!(SearchIndex::open(dir.path()).is_err());
        // The process "dies" after adding but before committing.
        index.add_uncommitted(&[doc(u, "uncommitted")]);
    }
    let (index, fresh) = SearchIndex::open(dir.path()).unwrap();
    assert!(!fresh);
    assert_eq!(index.num_docs(), 1);
    assert_eq!(ids(&search(&index, u, "committed")), [kept.message_id]);
    assert_eq!(search(&index, u, "uncommitted").total, 0);
}

#[test]
fn an_open_index_keeps_other_opens_out_with_or_without_its_writer() {
    let dir = tempfile::tempdir().unwrap();
    let u = Uuid::new_v4();
    let (index, _) = SearchIndex::open(dir.path()).unwrap();
    // Nothing written yet: no writer, and still nobody else may open the directory.
    assert!(!index.has_writer());
    let second = SearchIndex::open(dir.path()).map(|_| ()).unwrap_err();
    assert!(matches!(second, IndexError::Tantivy(TantivyError::LockFailure(..))), "{second:?}");
    upsert(&index, &[doc(u, "written")]);
    assert!(index.has_writer());
    // Closing the writer keeps what it committed, and the next write opens a new one.
    assert!(index.release_writer().unwrap());
    assert!(!index.has_writer());
    assert!(!index.release_writer().unwrap(), "nothing left to close");
    assert!(SearchIndex::open(dir.path()).is_err());
    assert_eq!(search(&index, u, "written").total, 1);
    upsert(&index, &[doc(u, "written again")]);
    assert_eq!(search(&index, u, "written").total, 2);
    drop(index);
    let (index, fresh) = SearchIndex::open(dir.path()).unwrap();
    assert!(!fresh);
    assert_eq!(index.num_docs(), 2);
}

#[test]
fn an_index_of_another_schema_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("notes.txt");
    std::fs::write(&foreign, "not ours").unwrap();
    {
        let mut b = Schema::builder();
        let title = b.add_text_field("title", TEXT | STORED);
        let old = Index::create_in_dir(dir.path(), b.build()).unwrap();
        let mut w: IndexWriter = old.writer_with_num_threads(1, 15_000_000).unwrap();
        w.add_document(doc!(title => "old")).unwrap();
        w.commit().unwrap();
    }
    std::fs::write(dir.path().join(VERSION_FILE), SCHEMA_VERSION).unwrap();
    let u = Uuid::new_v4();
    {
        let (index, fresh) = SearchIndex::open(dir.path()).unwrap();
        assert!(fresh);
        assert_eq!(index.num_docs(), 0);
        upsert(&index, &[doc(u, "new")]);
    }
    assert_eq!(std::fs::read_to_string(&foreign).unwrap(), "not ours");
    let (index, fresh) = SearchIndex::open(dir.path()).unwrap();
    assert!(!fresh);
    assert_eq!(search(&index, u, "new").total, 1);
    drop(index);

    // Same schema, another version (say, a changed analyzer): rebuilt too.
    std::fs::write(dir.path().join(VERSION_FILE), "arbor-search-0").unwrap();
    let (index, fresh) = SearchIndex::open(dir.path()).unwrap();
    assert!(fresh);
    assert_eq!(index.num_docs(), 0);
    drop(index);

    // Our schema and version, but not sorted by owner (as an earlier build wrote it): rebuilt,
    // since its segments would not keep one owner's documents together.
    wipe(dir.path()).unwrap();
    {
        let (schema, _) = schema::build_schema();
        let unsorted = Index::create_in_dir(dir.path(), schema).unwrap();
        assert!(unsorted.settings().sort_by_field.is_none());
    }
    std::fs::write(dir.path().join(VERSION_FILE), SCHEMA_VERSION).unwrap();
    let (index, fresh) = SearchIndex::open(dir.path()).unwrap();
    assert!(fresh);
    assert_eq!(index.inner.index.settings().sort_by_field, schema::settings().sort_by_field);
    drop(index);

    // A damaged index is rebuilt as well.
    std::fs::write(dir.path().join("meta.json"), "{ not json").unwrap();
    let (index, fresh) = SearchIndex::open(dir.path()).unwrap();
    assert!(fresh);
    assert_eq!(index.num_docs(), 0);
}

#[test]
fn only_index_files_are_wiped() {
    assert!(is_index_file("meta.json"));
    assert!(is_index_file(".managed.json"));
    assert!(is_index_file("0123456789abcdef0123456789abcdef.idx"));
    assert!(is_index_file("0123456789abcdef0123456789abcdef.12.del"));
    assert!(!is_index_file("arbor.db"));
    assert!(!is_index_file("0123456789abcdef.idx"));
    assert!(!is_index_file(".tantivy-writer.lock"));
}

#[test]
fn render_skips_bad_ranges() {
    assert_eq!(render("abc", 0..3, &[0..1, 0..1, 2..9]), "<mark>a</mark>bc");
    assert_eq!(render("abc", 1..9, &[]), "");
    assert_eq!(render("é", 0..1, &[]), "");
}

/// Many random queries over a small corpus spread over several segments (with deleted
/// documents) must return exactly what a naive scan of the same documents returns.
#[test]
fn random_queries_agree_with_a_naive_scan() {
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    use std::collections::HashMap;

    const VOCAB: [&str; 8] = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"];
    const ROLES: [&str; 3] = ["user", "assistant", "tool"];
    let mut rng = SmallRng::seed_from_u64(1);
    let index = SearchIndex::open_in_ram().unwrap();
    let users = [Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4()];
    let mut live: HashMap<Uuid, IndexDoc> = HashMap::new();
    let words = |rng: &mut SmallRng, n: usize| -> Vec<&'static str> {
        (0..n).map(|_| VOCAB[rng.random_range(0..VOCAB.len())]).collect()
    };
    for _batch in 0..6 {
        let mut ops = Vec::new();
        for _ in 0..50 {
            let n = rng.random_range(3..12);
            let mut d = doc(users[rng.random_range(0..3)], &words(&mut rng, n).join(" "));
            d.session_title = words(&mut rng, 2).join(" ");
            d.role = ROLES[rng.random_range(0..3)].into();
            d.created_at = at(2025, 1, rng.random_range(1..29), rng.random_range(0..24));
            d.has_attachment = rng.random_bool(0.3);
            live.insert(d.message_id, d.clone());
            ops.push(IndexOp::Upsert(d));
        }
        // Delete a few earlier documents, and edit one.
        let ids: Vec<Uuid> = live.keys().copied().take(5).collect();
        for id in &ids[..4] {
            live.remove(id);
            ops.push(IndexOp::DeleteMessage(*id));
        }
        if let Some(d) = live.get_mut(&ids[4]) {
            d.text = words(&mut rng, 4).join(" ");
            ops.push(IndexOp::Upsert(d.clone()));
        }
        index.apply(ops).unwrap();
    }

    let toks = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
    };
    let has_seq = |hay: &[String], needle: &[String]| hay.windows(needle.len()).any(|w| w == needle);
    let in_doc = |d: &IndexDoc, item: &str| {
        let n = toks(item);
        has_seq(&toks(&d.text), &n) || has_seq(&toks(&d.session_title), &n)
    };
    let mut checked = 0;
    for _ in 0..400 {
        let mut parts: Vec<String> = Vec::new();
        for _ in 0..rng.random_range(0..3) {
            parts.push(words(&mut rng, 1)[0].to_string());
        }
        if rng.random_bool(0.4) {
            parts.push(format!("\"{}\"", words(&mut rng, 2).join(" ")));
        }
        if rng.random_bool(0.2) {
            parts.push("omega".into());
        }
        if rng.random_bool(0.4) {
            parts.push(format!("-{}", words(&mut rng, 1)[0]));
        }
        if rng.random_bool(0.3) {
            parts.push(format!("-\"{}\"", words(&mut rng, 2).join(" ")));
        }
        if rng.random_bool(0.3) {
            parts.push(format!("role:{}", ROLES[rng.random_range(0..3)]));
        }
        if rng.random_bool(0.3) {
            parts.push(format!("after:2025-01-{:02}", rng.random_range(1..29)));
        }
        if rng.random_bool(0.3) {
            parts.push(format!("before:2025-01-{:02}", rng.random_range(1..29)));
        }
        if rng.random_bool(0.2) {
            parts.push("has:attachment".into());
        }
        let text = parts.join(" ");
        let Ok(q) = SearchQuery::parse(&text, None) else { continue };
        let day = |d: Option<chrono::NaiveDate>| d.map(|d| d.and_hms_opt(0, 0, 0).unwrap().and_utc());
        let (after, before) = (day(q.after), day(q.before));
        for &u in &users {
            let mut expected: Vec<Uuid> = live
                .values()
                .filter(|d| d.user_id == u)
                .filter(|d| q.words.iter().chain(&q.phrases).all(|w| in_doc(d, w)))
                .filter(|d| !q.excluded.iter().any(|w| in_doc(d, w)))
                .filter(|d| q.role.as_ref().is_none_or(|r| *r == d.role))
                .filter(|d| {
                    after.is_none_or(|a| d.created_at >= a) && before.is_none_or(|b| d.created_at < b)
                })
                .filter(|d| !q.has_attachment || d.has_attachment)
                .map(|d| d.message_id)
                .collect();
            expected.sort();
            let mut r = index.search(u, &q, 0, MAX_LIMIT).unwrap();
            r.hits.extend(index.search(u, &q, MAX_LIMIT, MAX_LIMIT).unwrap().hits);
            assert_eq!(r.total, expected.len(), "{text:?}");
            assert_eq!(sorted(ids(&r)), expected, "{text:?}");
            let scores: Vec<f32> = r.hits.iter().map(|h| h.score).collect();
            assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{text:?}: {scores:?}");
            checked += 1;
        }
    }
    assert!(checked > 600, "{checked}");
}

#[test]
fn merged_segments_keep_their_stored_text_read_from_the_stores_on_disk() {
    // Two segments whose stores are each over a mebibyte and without deletes, so the merge
    // copies them whole (tantivy's `stack`): the large-read path of `directory::ReadAtFile`.
    let dir = tempfile::tempdir().unwrap();
    let (index, _) = SearchIndex::open(dir.path()).unwrap();
    let u = Uuid::new_v4();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut text = |n: usize| -> String {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                format!("w{:x}", seed % 1_000_000)
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut marked = Vec::new();
    for batch in 0..2 {
        let mut docs: Vec<IndexDoc> = (0..8_000).map(|_| doc(u, &text(60))).collect();
        docs[batch * 7].text = format!("needle{batch} {}", text(20));
        marked.push(docs[batch * 7].message_id);
        index.add_uncommitted(&docs);
        index.with_writer(|w| Ok(w.commit()?)).unwrap();
    }
    let segments = index.inner.index.searchable_segment_ids().unwrap();
    assert!(segments.len() >= 2, "a segment per commit and writer thread: {segments:?}");
    let store_sizes: Vec<u64> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "store"))
        .map(|e| e.metadata().unwrap().len())
        .collect();
    assert!(store_sizes.iter().all(|&n| n > 1024 * 1024), "stores too small to test: {store_sizes:?}");

    index.with_writer(|w| Ok(w.merge(&segments).wait().map(|_| ())?)).unwrap();
    index.inner.reader.reload().unwrap();
    assert_eq!(index.inner.index.searchable_segment_ids().unwrap().len(), 1);
    assert_eq!(index.num_docs(), 16_000);
    for (batch, id) in marked.iter().enumerate() {
        let r = search(&index, u, &format!("needle{batch}"));
        assert_eq!(ids(&r), [*id]);
        assert!(
            r.hits[0].snippet_html().starts_with(&format!("<mark>needle{batch}</mark> w")),
            "{}",
            r.hits[0].snippet_html()
        );
    }
}

#[test]
fn each_segment_keeps_one_owners_documents_together_and_merges_keep_them_so() {
    let dir = tempfile::tempdir().unwrap();
    let (index, _) = SearchIndex::open(dir.path()).unwrap();
    let users: Vec<Uuid> = (0..5).map(|_| Uuid::now_v7()).collect();
    let mut expected: Vec<(Uuid, Uuid)> = Vec::new();
    for batch in 0..3 {
        // Interleaved, as messages of several people arrive.
        let docs: Vec<IndexDoc> =
            (0..200).map(|i| doc(users[(i * 7 + batch) % users.len()], &format!("common w{i}"))).collect();
        expected.extend(docs.iter().map(|d| (d.user_id, d.message_id)));
        upsert(&index, &docs);
    }
    let owners_in_order = |index: &SearchIndex| -> Vec<Vec<u64>> {
        let searcher = index.inner.reader.searcher();
        searcher
            .segment_readers()
            .iter()
            .map(|r| {
                let column = r.fast_fields().u64(schema::OWNER_ORDER).unwrap();
                (0..r.max_doc()).map(|d| column.first(d).unwrap()).collect()
            })
            .collect()
    };
    let check = |index: &SearchIndex| {
        for owners in owners_in_order(index) {
            assert!(owners.is_sorted(), "one owner's documents are scattered: {owners:?}");
        }
        for u in &users {
            let mut want: Vec<Uuid> = expected.iter().filter(|(o, _)| o == u).map(|(_, m)| *m).collect();
            want.sort();
            let query = SearchQuery::parse("common", None).unwrap();
            let mut got = Vec::new();
            for offset in (0..want.len()).step_by(MAX_LIMIT) {
                let r = index.search(*u, &query, offset, MAX_LIMIT).unwrap();
                assert_eq!(r.total, want.len());
                got.extend(ids(&r));
            }
            assert_eq!(sorted(got), want);
        }
    };
    assert!(owners_in_order(&index).len() >= 3, "a segment per commit at least");
    check(&index);

    let segments = index.inner.index.searchable_segment_ids().unwrap();
    index.with_writer(|w| Ok(w.merge(&segments).wait().map(|_| ())?)).unwrap();
    index.inner.reader.reload().unwrap();
    assert_eq!(owners_in_order(&index).len(), 1);
    check(&index);
    // The key is the id's random half, so users created in one millisecond still differ.
    let keys: std::collections::HashSet<u64> = users.iter().map(|u| schema::owner_order(*u)).collect();
    assert_eq!(keys.len(), users.len());
}
