use std::collections::BTreeSet;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tantivy::collector::{Count, TopDocs};
use tantivy::query::{AllQuery, BooleanQuery, Occur, PhraseQuery, TermQuery};
use tantivy::schema::{Field, STRING, Schema, TEXT};
use tantivy::{DocAddress, Index, IndexWriter, Searcher, TantivyDocument};

use super::*;

/// The count by definition: starts where every slot's term sits at its offset.
fn brute_count(slots: &[Slot], positions: &[Vec<u32>]) -> u32 {
    let sets: Vec<BTreeSet<u32>> = positions.iter().map(|l| l.iter().copied().collect()).collect();
    let starts = positions[slots[0].list].iter().filter_map(|p| p.checked_sub(slots[0].offset));
    starts.filter(|s| slots.iter().all(|slot| sets[slot.list].contains(&(s + slot.offset)))).count() as u32
}

fn random_positions(rng: &mut SmallRng, len: u32, density: u32) -> Vec<u32> {
    (0..len).filter(|_| rng.random_range(0..100) < density).collect()
}

/// Each offset on a list of its own.
fn one_list_each(offsets: &[u32]) -> Vec<Slot> {
    offsets.iter().enumerate().map(|(list, &offset)| Slot { offset, list }).collect()
}

#[test]
fn the_bit_set_and_the_merge_count_what_the_definition_counts() {
    let mut rng = SmallRng::seed_from_u64(5);
    let mut counting = Counting::default();
    let (mut seen_matches, mut repeated) = (0, 0);
    for round in 0..4000 {
        let tokens = rng.random_range(2..5usize);
        // Offsets with gaps sometimes (a token the analyzer dropped), the first always 0; a word
        // repeated sometimes ("step by step"): its slots share one list.
        let mut slots = vec![Slot { offset: 0, list: 0 }];
        let mut lists = 1;
        for _ in 1..tokens {
            let offset = slots[slots.len() - 1].offset + rng.random_range(1..3);
            let list = if rng.random_range(0..4) == 0 {
                repeated += 1;
                rng.random_range(0..lists)
            } else {
                lists += 1;
                lists - 1
            };
            slots.push(Slot { offset, list });
        }
        let len = if round % 10 == 0 { rng.random_range(4000..9000) } else { rng.random_range(1..400) };
        let positions: Vec<Vec<u32>> = (0..lists).map(|_| random_positions(&mut rng, len, 40)).collect();
        if positions.iter().any(Vec::is_empty) {
            continue;
        }
        let want = brute_count(&slots, &positions);
        seen_matches += want;
        assert_eq!(counting.count(&slots, &positions, BIT_SET_POSITIONS), want, "{slots:?} {positions:?}");
        assert_eq!(counting.count(&slots, &positions, 0), want, "merging: {slots:?} {positions:?}");
    }
    assert!(seen_matches > 1000, "the random lists held too few phrases to test anything: {seen_matches}");
    assert!(repeated > 500, "too few repeated words: {repeated}");
}

#[test]
fn a_term_that_cannot_reach_its_offset_means_no_phrase() {
    let mut counting = Counting::default();
    // The second term only at position 0: no start s >= 0 puts it at s + 1.
    assert_eq!(counting.count(&one_list_each(&[0, 1]), &[vec![0, 5], vec![0]], BIT_SET_POSITIONS), 0);
    assert_eq!(counting.count(&one_list_each(&[0, 1]), &[vec![], vec![1]], BIT_SET_POSITIONS), 0);
    assert_eq!(counting.count(&[], &[], BIT_SET_POSITIONS), 0);
    // A slot naming a list that is not there counts nothing rather than panicking.
    assert_eq!(counting.count(&[Slot { offset: 0, list: 3 }], &[vec![1]], BIT_SET_POSITIONS), 0);
    // Positions near the top of u32 do not overflow either way of counting.
    let high = vec![u32::MAX - 2, u32::MAX - 1];
    assert_eq!(counting.count(&one_list_each(&[0, 1]), &[high.clone(), high.clone()], BIT_SET_POSITIONS), 1);
    // One list for a repeated word: "a a" in "a a a" starts twice.
    let slots = [Slot { offset: 0, list: 0 }, Slot { offset: 1, list: 0 }];
    assert_eq!(counting.count(&slots, &[vec![4, 5, 6]], BIT_SET_POSITIONS), 2);
    assert_eq!(counting.count(&slots, &[vec![4, 5, 6]], 0), 2);
}

const WORDS: [&str; 6] = ["hea", "her", "vio", "pi", "fle", "cat"];

struct Fixture {
    index: Index,
    text: Field,
    docs: u32,
}

/// Documents of a few words, so phrases repeat inside a document ("hea hea hea"); some longer
/// than the bit set's reach; some with two values of the field (no phrase spans them); a few
/// deleted. Several segments.
fn fixture() -> Fixture {
    let mut schema = Schema::builder();
    let text = schema.add_text_field("text", TEXT);
    let id = schema.add_text_field("id", STRING);
    let index = Index::create_in_ram(schema.build());
    let mut writer: IndexWriter = index.writer_with_num_threads(1, 20_000_000).unwrap();
    let mut rng = SmallRng::seed_from_u64(11);
    let mut docs = 0;
    for segment in 0..3 {
        for n in 0..400 {
            let len = if n % 50 == 0 { rng.random_range(5000..6000) } else { rng.random_range(1..60) };
            // Skewed towards the first words, as real text is.
            let words: Vec<&str> = (0..len)
                .map(|_| WORDS[rng.random_range(0..WORDS.len()).min(rng.random_range(0..WORDS.len()))])
                .collect();
            let mut doc = TantivyDocument::default();
            doc.add_text(text, words.join(" "));
            if n % 7 == 0 {
                doc.add_text(text, "hea her vio");
            }
            doc.add_text(id, format!("{segment}-{n}"));
            writer.add_document(doc).unwrap();
            docs += 1;
        }
        writer.commit().unwrap();
    }
    for n in (3..400).step_by(37) {
        writer.delete_term(Term::from_field_text(id, &format!("1-{n}")));
    }
    writer.commit().unwrap();
    Fixture { index, text, docs }
}

fn terms(f: &Fixture, words: &[(u32, &str)]) -> Vec<(u32, Term)> {
    words.iter().map(|(o, w)| (*o, Term::from_field_text(f.text, w))).collect()
}

/// Every match with its score, in Tantivy's order (best first, then by address).
fn ranked(searcher: &Searcher, query: &dyn Query, limit: usize) -> Vec<(Score, DocAddress)> {
    searcher.search(query, &TopDocs::with_limit(limit).order_by_score()).unwrap()
}

fn phrases(rng: &mut SmallRng) -> Vec<Vec<(u32, &'static str)>> {
    let mut out = Vec::new();
    for _ in 0..60 {
        let n = rng.random_range(2..4usize);
        let gap = if rng.random_range(0..4) == 0 { 1 } else { 0 };
        out.push(
            (0..n)
                .map(|i| (i as u32 + if i > 0 { gap } else { 0 }, WORDS[rng.random_range(0..WORDS.len())]))
                .collect(),
        );
    }
    out.push(vec![(0, "hea"), (1, "hea")]);
    out.push(vec![(0, "vio"), (1, "hea")]);
    // A term no document holds.
    out.push(vec![(0, "hea"), (1, "absent")]);
    out
}

#[test]
fn finds_and_scores_exactly_what_tantivys_phrase_query_does() {
    let f = fixture();
    let searcher = f.index.reader().unwrap().searcher();
    let mut rng = SmallRng::seed_from_u64(3);
    let (mut compared, mut led_compared) = (0, 0);
    for words in phrases(&mut rng) {
        let ours = Phrase::new(terms(&f, &words));
        let theirs = PhraseQuery::new_with_offset(
            terms(&f, &words).into_iter().map(|(o, t)| (o as usize, t)).collect(),
        );
        let (a, b) = (ranked(&searcher, &ours, f.docs as usize), ranked(&searcher, &theirs, f.docs as usize));
        assert_eq!(a.len(), b.len(), "{words:?}");
        for ((sa, da), (sb, db)) in a.iter().zip(&b) {
            assert_eq!(da, db, "{words:?}");
            assert_eq!(sa.to_bits(), sb.to_bits(), "{words:?} at {da:?}");
        }
        // Counting runs with scoring disabled.
        assert_eq!(searcher.search(&ours, &Count).unwrap(), b.len(), "{words:?}");
        compared += b.len();
        // Inside an intersection led by a rarer word, the phrase is asked document by document
        // (`seek_danger`, and `scorer_danger` when the scorers are made).
        let led = |phrase: Box<dyn Query>| {
            let cat = TermQuery::new(Term::from_field_text(f.text, "cat"), IndexRecordOption::WithFreqs);
            BooleanQuery::new(vec![(Occur::Must, Box::new(cat) as Box<dyn Query>), (Occur::Must, phrase)])
        };
        let (a, b) = (
            ranked(&searcher, &led(Box::new(ours)), f.docs as usize),
            ranked(&searcher, &led(Box::new(theirs)), f.docs as usize),
        );
        assert_eq!(a.len(), b.len(), "led by a word: {words:?}");
        for ((sa, da), (sb, db)) in a.iter().zip(&b) {
            assert_eq!((da, sa.to_bits()), (db, sb.to_bits()), "led by a word: {words:?}");
        }
        led_compared += b.len();
    }
    assert!(compared > 5000, "too few matches compared: {compared}");
    assert!(led_compared > 500, "too few matches compared in an intersection: {led_compared}");
}

#[test]
fn as_an_exclusion_it_removes_exactly_the_documents_holding_the_phrase() {
    let f = fixture();
    let searcher = f.index.reader().unwrap().searcher();
    let all: BTreeSet<DocAddress> =
        ranked(&searcher, &AllQuery, f.docs as usize).into_iter().map(|(_, d)| d).collect();
    let mut rng = SmallRng::seed_from_u64(4);
    for words in phrases(&mut rng) {
        let holding: BTreeSet<DocAddress> =
            ranked(&searcher, &Phrase::new(terms(&f, &words)), f.docs as usize)
                .into_iter()
                .map(|(_, d)| d)
                .collect();
        // Exclusion asks the scorer for documents behind its position too.
        let without = BooleanQuery::new(vec![
            (Occur::Must, Box::new(AllQuery) as Box<dyn Query>),
            (Occur::MustNot, Box::new(Phrase::new(terms(&f, &words)))),
        ]);
        let got: BTreeSet<DocAddress> =
            ranked(&searcher, &without, f.docs as usize).into_iter().map(|(_, d)| d).collect();
        let want: BTreeSet<DocAddress> = all.difference(&holding).copied().collect();
        assert_eq!(got, want, "{words:?}");
    }
}

#[test]
fn explains_its_score() {
    let f = fixture();
    let searcher = f.index.reader().unwrap().searcher();
    let query = Phrase::new(terms(&f, &[(0, "hea"), (1, "her")]));
    let top = ranked(&searcher, &query, 3);
    assert_eq!(top.len(), 3);
    for (score, addr) in top {
        assert_eq!(query.explain(&searcher, addr).unwrap().value().to_bits(), score.to_bits());
    }
    // A document without the phrase: not an explanation, an error.
    let absent = ranked(&searcher, &AllQuery, f.docs as usize)
        .into_iter()
        .map(|(_, d)| d)
        .find(|d| query.explain(&searcher, *d).is_err());
    assert!(absent.is_some(), "some document lacks \"hea her\"");
}

#[test]
fn a_field_without_positions_is_an_error_not_a_panic() {
    let f = fixture();
    let searcher = f.index.reader().unwrap().searcher();
    let id = f.index.schema().get_field("id").unwrap();
    let query = Phrase::new(vec![(0, Term::from_field_text(id, "a")), (1, Term::from_field_text(id, "b"))]);
    assert!(matches!(searcher.search(&query, &Count), Err(TantivyError::SchemaError(_))));
}
