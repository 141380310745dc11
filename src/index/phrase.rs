//! Phrase queries: every token of a phrase at its offset from the first, in one document.
//!
//! Tantivy's `PhraseQuery` counts a phrase in a document by merging the tokens' position lists
//! with a branch on every step; for a phrase of a person's most common words that merge was a
//! third of the search's time at a million messages (BENCHMARKS.md, "Performance work",
//! step 28). This query marks where the phrase can start in a bit set and counts the hits of the
//! other tokens there, and it scores exactly as Tantivy's does (BM25 of the phrase's count in
//! the document, with the summed idf of its terms), so the same documents come back in the same
//! order with the same scores. Its scorer also answers seeks to documents behind its position
//! (the first document at or after its own), which Tantivy's exclusion asks for.

use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::{Postings, SegmentPostings};
use tantivy::query::{Bm25Weight, EmptyScorer, EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocId, DocSet, Score, SeekDangerResult, SegmentReader, TERMINATED, TantivyError, Term};

/// Starts below this position are counted in a bit set (at most 512 bytes); a document where
/// the phrase could start further in is counted by merging the lists instead.
const BIT_SET_POSITIONS: u32 = 4096;

/// Two tokens or more of one field, each at its offset from the first.
#[derive(Clone, Debug)]
pub(super) struct Phrase {
    terms: Vec<(u32, Term)>,
}

impl Phrase {
    /// `terms` holds two terms or more of one field, the first at offset 0.
    pub(super) fn new(terms: Vec<(u32, Term)>) -> Phrase {
        debug_assert!(terms.len() >= 2, "a phrase has two terms or more");
        Phrase { terms }
    }
}

impl Query for Phrase {
    fn weight(&self, enable_scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let Some((_, first)) = self.terms.first() else {
            return tantivy::query::EmptyQuery.weight(enable_scoring);
        };
        let entry = enable_scoring.schema().get_field_entry(first.field());
        let has_positions =
            entry.field_type().get_index_record_option().is_some_and(IndexRecordOption::has_positions);
        if !has_positions {
            return Err(TantivyError::SchemaError(format!(
                "phrase query on field {:?}, which has no positions indexed",
                entry.name()
            )));
        }
        let bm25 = match enable_scoring {
            EnableScoring::Enabled { statistics_provider, .. } => {
                let terms: Vec<Term> = self.terms.iter().map(|(_, t)| t.clone()).collect();
                Some(Bm25Weight::for_terms(statistics_provider, &terms)?)
            }
            EnableScoring::Disabled { .. } => None,
        };
        Ok(Box::new(PhraseWeight { terms: self.terms.clone(), bm25 }))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a Term, bool)) {
        for (_, term) in &self.terms {
            visitor(term, true);
        }
    }
}

struct PhraseWeight {
    terms: Vec<(u32, Term)>,
    /// `None` when scoring is disabled.
    bm25: Option<Bm25Weight>,
}

impl PhraseWeight {
    /// `None` when a term is not in this segment.
    fn phrase_scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Option<PhraseScorer>> {
        let Some((_, first)) = self.terms.first() else { return Ok(None) };
        let field = first.field();
        let index = reader.inverted_index(field)?;
        // A word the phrase repeats ("step by step") is read once per document.
        let mut distinct: Vec<&Term> = Vec::with_capacity(self.terms.len());
        let mut postings = Vec::with_capacity(self.terms.len());
        let mut slots = Vec::with_capacity(self.terms.len());
        for (offset, term) in &self.terms {
            let list = match distinct.iter().position(|t| *t == term) {
                Some(list) => list,
                None => {
                    let Some(p) = index.read_postings(term, IndexRecordOption::WithFreqsAndPositions)? else {
                        return Ok(None);
                    };
                    distinct.push(term);
                    postings.push(p);
                    postings.len() - 1
                }
            };
            slots.push(Slot { offset: *offset, list });
        }
        let fieldnorms = match self.bm25 {
            Some(_) => reader.fieldnorms_readers().get_field(field)?,
            None => None,
        }
        .unwrap_or_else(|| FieldNormReader::constant(reader.max_doc(), 1));
        Ok(Some(PhraseScorer::new(
            slots,
            postings,
            self.bm25.as_ref().map(|w| w.boost_by(boost)),
            fieldnorms,
        )))
    }
}

impl Weight for PhraseWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        Ok(match self.phrase_scorer(reader, boost)? {
            Some(mut scorer) => {
                scorer.seek(0);
                Box::new(scorer)
            }
            None => Box::new(EmptyScorer),
        })
    }

    /// Starts at the intersection's candidate instead of reading positions up to the first
    /// match in the segment, which may be far into other people's documents.
    fn scorer_danger(
        &self,
        reader: &SegmentReader,
        target: DocId,
        boost: Score,
    ) -> tantivy::Result<(SeekDangerResult, Box<dyn Scorer>)> {
        Ok(match self.phrase_scorer(reader, boost)? {
            Some(mut scorer) => (scorer.seek_danger(target), Box::new(scorer)),
            None => (SeekDangerResult::SeekLowerBound(TERMINATED), Box::new(EmptyScorer)),
        })
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let does_not_match = || TantivyError::InvalidArgument(format!("Document #({doc}) does not match"));
        let Some(mut scorer) = self.phrase_scorer(reader, 1.0)? else { return Err(does_not_match()) };
        if scorer.seek(doc) != doc {
            return Err(does_not_match());
        }
        let mut explanation = Explanation::new("Phrase Scorer", scorer.score());
        if let Some(bm25) = &self.bm25 {
            explanation.add_detail(bm25.explain(scorer.fieldnorms.fieldnorm_id(doc), scorer.count));
        }
        Ok(explanation)
    }
}

/// One token of a phrase: its offset from the first, and which of the distinct terms' position
/// lists holds it.
#[derive(Clone, Copy, Debug)]
struct Slot {
    offset: u32,
    list: usize,
}

/// The documents of one segment holding the phrase, in order.
struct PhraseScorer {
    /// The phrase's tokens, the rarest term's first (its positions seed the count).
    slots: Vec<Slot>,
    /// The postings of each distinct term, the rarest first (it leads the walk over the
    /// documents that hold every term).
    postings: Vec<SegmentPostings>,
    /// The positions of each distinct term in the current document, kept to reuse their
    /// allocations.
    positions: Vec<Vec<u32>>,
    counting: Counting,
    /// With `matched`, a document holding the phrase; without, the first document not yet ruled
    /// out (after a `seek_danger` that found none, or before the first seek).
    doc: DocId,
    matched: bool,
    /// The phrase's count in `doc`.
    count: u32,
    bm25: Option<Bm25Weight>,
    fieldnorms: FieldNormReader,
}

impl PhraseScorer {
    fn new(
        mut slots: Vec<Slot>,
        postings: Vec<SegmentPostings>,
        bm25: Option<Bm25Weight>,
        fieldnorms: FieldNormReader,
    ) -> PhraseScorer {
        // The rarest term first; each slot follows its list to the list's new place.
        let mut ranked: Vec<(usize, SegmentPostings)> = postings.into_iter().enumerate().collect();
        ranked.sort_by_key(|(_, p)| p.doc_freq());
        let mut rank_of = vec![0; ranked.len()];
        for (rank, (list, _)) in ranked.iter().enumerate() {
            rank_of[*list] = rank;
        }
        for slot in &mut slots {
            slot.list = rank_of[slot.list];
        }
        slots.sort_by_key(|slot| slot.list);
        let postings: Vec<SegmentPostings> = ranked.into_iter().map(|(_, p)| p).collect();
        PhraseScorer {
            positions: vec![Vec::new(); postings.len()],
            slots,
            postings,
            counting: Counting::default(),
            doc: 0,
            matched: false,
            count: 0,
            bm25,
            fieldnorms,
        }
    }

    /// Moves every term's postings to the first document at or after `target` that holds them
    /// all.
    fn align(&mut self, mut target: DocId) -> DocId {
        'again: loop {
            if target == TERMINATED {
                return TERMINATED;
            }
            for p in &mut self.postings {
                let mut doc = p.doc();
                if doc < target {
                    doc = p.seek(target);
                }
                if doc > target {
                    target = doc;
                    continue 'again;
                }
            }
            return target;
        }
    }

    /// The phrase's count in the document every term's postings are on.
    fn count_here(&mut self) -> u32 {
        for (p, out) in self.postings.iter_mut().zip(&mut self.positions) {
            p.positions(out);
        }
        self.counting.count(&self.slots, &self.positions, BIT_SET_POSITIONS)
    }

    /// Moves to the first document at or after `target` holding the phrase.
    fn move_to_match(&mut self, mut target: DocId) -> DocId {
        self.matched = true;
        loop {
            self.doc = self.align(target);
            if self.doc == TERMINATED {
                return TERMINATED;
            }
            let count = self.count_here();
            if count > 0 {
                self.count = count;
                return self.doc;
            }
            target = self.doc + 1;
        }
    }
}

impl DocSet for PhraseScorer {
    fn advance(&mut self) -> DocId {
        match (self.matched, self.doc) {
            (true, TERMINATED) => TERMINATED,
            (true, doc) => self.move_to_match(doc + 1),
            (false, doc) => self.move_to_match(doc),
        }
    }

    fn seek(&mut self, target: DocId) -> DocId {
        if self.matched && target <= self.doc {
            return self.doc;
        }
        self.move_to_match(target.max(self.doc))
    }

    /// Checks `target` alone: a miss answers where the next document holding every term is,
    /// without reading positions up to the next match (Tantivy's intersection asks each of its
    /// other members this way). A target behind the position is answered from the position.
    fn seek_danger(&mut self, target: DocId) -> SeekDangerResult {
        if self.matched && target == self.doc {
            return SeekDangerResult::Found;
        }
        if target < self.doc {
            return SeekDangerResult::SeekLowerBound(self.doc);
        }
        if target == TERMINATED {
            self.doc = TERMINATED;
            self.matched = true;
            return SeekDangerResult::SeekLowerBound(TERMINATED);
        }
        let doc = self.align(target);
        self.doc = doc;
        self.matched = doc == TERMINATED;
        if doc > target {
            return SeekDangerResult::SeekLowerBound(doc);
        }
        let count = self.count_here();
        if count > 0 {
            self.count = count;
            self.matched = true;
            SeekDangerResult::Found
        } else {
            self.doc = doc + 1;
            SeekDangerResult::SeekLowerBound(doc + 1)
        }
    }

    fn doc(&self) -> DocId {
        self.doc
    }

    /// As Tantivy's phrase scorer estimates: far fewer documents hold the phrase than hold
    /// every term, and each one costs a read of every term's positions.
    fn size_hint(&self) -> u32 {
        self.postings.iter().map(|p| p.size_hint()).min().unwrap_or(0)
            / (10 * self.postings.len() as u32).max(1)
    }

    fn cost(&self) -> u64 {
        self.postings.iter().map(|p| u64::from(p.size_hint())).min().unwrap_or(0)
            * 10
            * self.postings.len() as u64
    }
}

impl Scorer for PhraseScorer {
    fn score(&mut self) -> Score {
        match &self.bm25 {
            Some(bm25) => bm25.score(self.fieldnorms.fieldnorm_id(self.doc), self.count),
            None => 1.0,
        }
    }
}

/// Buffers for counting a phrase in one document, kept between documents.
#[derive(Default)]
struct Counting {
    starts: Vec<u64>,
    next: Vec<u64>,
    merged: Vec<u32>,
}

impl Counting {
    /// How many times the phrase starts in a document: the starts `s` where every slot's term
    /// is at position `s + offset`. `positions[slot.list]` holds that term's positions,
    /// ascending; `slots` is never empty and every `list` is in `positions`.
    fn count(&mut self, slots: &[Slot], positions: &[Vec<u32>], bit_set_positions: u32) -> u32 {
        // The last start every slot can reach.
        let mut limit = u32::MAX;
        for slot in slots {
            match positions.get(slot.list).and_then(|l| l.last()) {
                Some(&last) if last >= slot.offset => limit = limit.min(last - slot.offset),
                _ => return 0,
            }
        }
        let Some((first, rest)) = slots.split_first() else { return 0 };
        if limit < bit_set_positions {
            self.with_bits(*first, rest, positions, limit)
        } else {
            self.by_merging(*first, rest, positions)
        }
    }

    /// Marks the first slot's starts, keeps those each middle slot also reaches, and counts
    /// the last slot's hits among them. No branch depends on the data, so a long list of a
    /// common word costs a few cycles a position.
    fn with_bits(&mut self, first: Slot, rest: &[Slot], positions: &[Vec<u32>], limit: u32) -> u32 {
        let words = limit as usize / 64 + 1;
        let starts_of = |slot: Slot| {
            positions[slot.list]
                .iter()
                .filter_map(move |p| p.checked_sub(slot.offset))
                .take_while(move |s| *s <= limit)
        };
        self.starts.clear();
        self.starts.resize(words, 0);
        for s in starts_of(first) {
            self.starts[s as usize / 64] |= 1 << (s % 64);
        }
        let Some((last, middle)) = rest.split_last() else {
            return self.starts.iter().map(|w| w.count_ones()).sum();
        };
        for slot in middle {
            self.next.clear();
            self.next.resize(words, 0);
            for s in starts_of(*slot) {
                self.next[s as usize / 64] |= self.starts[s as usize / 64] & (1 << (s % 64));
            }
            std::mem::swap(&mut self.starts, &mut self.next);
        }
        starts_of(*last).map(|s| ((self.starts[s as usize / 64] >> (s % 64)) & 1) as u32).sum()
    }

    /// Keeps the first slot's starts that every other slot also reaches, merging sorted lists.
    fn by_merging(&mut self, first: Slot, rest: &[Slot], positions: &[Vec<u32>]) -> u32 {
        self.merged.clear();
        self.merged.extend(positions[first.list].iter().filter_map(|p| p.checked_sub(first.offset)));
        for slot in rest {
            let list = &positions[slot.list];
            let mut kept = 0;
            let mut j = 0;
            for i in 0..self.merged.len() {
                let want = u64::from(self.merged[i]) + u64::from(slot.offset);
                while j < list.len() && u64::from(list[j]) < want {
                    j += 1;
                }
                if j < list.len() && u64::from(list[j]) == want {
                    self.merged[kept] = self.merged[i];
                    kept += 1;
                }
            }
            self.merged.truncate(kept);
        }
        self.merged.len() as u32
    }
}

#[cfg(test)]
mod tests;
