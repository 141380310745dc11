//! Arbor's own token counter, for providers that report no usage and cannot count (every
//! OpenAI-compatible server): OpenAI's `o200k_base` byte-pair encoding. Other models'
//! tokenizers differ by a few percent on prose; that is close enough for a context gauge and a
//! `count_tokens` answer marked as an estimate, and far closer than characters.
//!
//! Why not `tiktoken-rs` at run time: its o200k tables hold every token three times in
//! separate heap allocations, and its pre-split regular expression compiles Unicode classes
//! into large automata: about 49 MB resident, more than the whole server otherwise uses. Here
//! the 200,000 tokens live in one byte arena indexed by rank, with a table of ranks hashed by
//! their bytes (about 3.5 MB), and the pre-split is a scanner over Unicode general categories
//! ([`split`]) that follows the pattern's backtracking exactly. Built on first use, so a server
//! whose providers all report usage never holds it. The algorithm is tiktoken's (lowest-rank
//! merges first), and the tests compare the counts with `tiktoken-rs` on prose, code, many
//! scripts and random text. The ranks file is OpenAI's, from tiktoken (MIT).

use std::hash::BuildHasher;
use std::sync::LazyLock;

use base64::Engine as _;
use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

use super::types::{ChatRequest, Part};

mod split;

/// Text longer than this is counted on its first part and scaled: a megabyte of tool output
/// costs milliseconds, not seconds, and the estimate stays within a few percent.
const SAMPLE_BYTES: usize = 256 * 1024;

/// Longer pre-split pieces (a run of letters with no space, base64) are merged in slices of
/// this size: merging is quadratic in a piece's length, and a hostile message must not cost
/// seconds. Real words are far shorter, so counts of ordinary text are exact.
const PIECE_BYTES: usize = 256;

/// An image, whatever its size: providers bill between about 250 and 1,600 tokens for one
/// (OpenAI's high detail tile count, Anthropic's width × height / 750), so a middle value.
pub const IMAGE_TOKENS: u64 = 1_000;

/// OpenAI's o200k_base ranks: one `base64(token) rank` line per token, ranks in line order.
const RANKS: &str = include_str!("../../config/o200k_base.tiktoken");

/// The encoding: token `r`'s bytes are `arena[starts[r]..starts[r + 1]]`, and `by_bytes` finds
/// a rank from bytes.
struct Encoding {
    arena: Vec<u8>,
    starts: Vec<u32>,
    by_bytes: HashTable<u32>,
}

static O200K: LazyLock<Encoding> = LazyLock::new(Encoding::o200k_base);

fn hash(bytes: &[u8]) -> u64 {
    FxBuildHasher.hash_one(bytes)
}

impl Encoding {
    fn o200k_base() -> Encoding {
        let engine = base64::engine::general_purpose::STANDARD;
        let mut arena = Vec::with_capacity(1_500_000);
        let mut starts = Vec::with_capacity(200_001);
        for line in RANKS.lines() {
            let token = line.split_once(' ').map_or(line, |(token, _)| token);
            let start = arena.len();
            // The file is compiled in and checked by a test; a bad line would be an empty token.
            if engine.decode_vec(token, &mut arena).is_err() {
                arena.truncate(start);
            }
            starts.push(u32::try_from(start).unwrap_or(u32::MAX));
        }
        starts.push(u32::try_from(arena.len()).unwrap_or(u32::MAX));
        arena.shrink_to_fit();
        let mut encoding = Encoding { arena, starts, by_bytes: HashTable::new() };
        let mut table = HashTable::with_capacity(encoding.starts.len() - 1);
        for rank in 0..encoding.starts.len() - 1 {
            let rank = u32::try_from(rank).unwrap_or(u32::MAX);
            let bytes = encoding.bytes(rank);
            if !bytes.is_empty() {
                table.insert_unique(hash(bytes), rank, |r| hash(encoding.bytes(*r)));
            }
        }
        encoding.by_bytes = table;
        encoding
    }

    fn bytes(&self, rank: u32) -> &[u8] {
        let r = rank as usize;
        match (self.starts.get(r), self.starts.get(r + 1)) {
            (Some(&a), Some(&b)) => self.arena.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    fn rank(&self, bytes: &[u8]) -> Option<u32> {
        self.by_bytes.find(hash(bytes), |r| self.bytes(*r) == bytes).copied()
    }

    fn count(&self, text: &str) -> u64 {
        split::pieces(text).map(|piece| self.merged(piece.as_bytes())).sum()
    }

    /// Tokens of one pre-split piece, slice by slice.
    fn merged(&self, piece: &[u8]) -> u64 {
        piece.chunks(PIECE_BYTES).map(|slice| self.piece_tokens(slice)).sum()
    }

    /// Tokens of one piece: tiktoken's merge, lowest rank first, until no pair is a token.
    fn piece_tokens(&self, piece: &[u8]) -> u64 {
        if piece.len() <= 1 || self.rank(piece).is_some() {
            return piece.len().min(1) as u64;
        }
        let rank_of = |bytes: &[u8]| self.rank(bytes).unwrap_or(u32::MAX);
        // (start, rank of the pair starting there); the last two entries close the list.
        let mut parts: Vec<(usize, u32)> =
            (0..piece.len() - 1).map(|i| (i, rank_of(&piece[i..i + 2]))).collect();
        parts.push((piece.len() - 1, u32::MAX));
        parts.push((piece.len(), u32::MAX));
        let pair_rank = |parts: &[(usize, u32)], i: usize| {
            if i + 3 < parts.len() { rank_of(&piece[parts[i].0..parts[i + 3].0]) } else { u32::MAX }
        };
        loop {
            let lowest = parts[..parts.len() - 1]
                .iter()
                .enumerate()
                .min_by_key(|(i, (_, rank))| (*rank, *i))
                .filter(|(_, (_, rank))| *rank != u32::MAX)
                .map(|(i, _)| i);
            let Some(i) = lowest else { break };
            if i > 0 {
                parts[i - 1].1 = pair_rank(&parts, i - 1);
            }
            parts[i].1 = pair_rank(&parts, i);
            parts.remove(i + 1);
        }
        (parts.len() - 1) as u64
    }
}

/// Tokens in `text`.
pub fn count_text(text: &str) -> u64 {
    if text.is_empty() {
        return 0;
    }
    if text.len() <= SAMPLE_BYTES {
        return O200K.count(text);
    }
    let mut cut = SAMPLE_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let sampled = O200K.count(&text[..cut]);
    // Scaled by bytes: u128 so a long text cannot overflow the product.
    let scaled = u128::from(sampled) * text.len() as u128 / cut.max(1) as u128;
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// Tokens one part takes in a prompt.
pub fn count_part(part: &Part) -> u64 {
    match part {
        Part::Text { text } | Part::Thought { text, .. } => count_text(text),
        Part::ToolCall { name, arguments, .. } => count_text(name) + count_text(&arguments.to_string()),
        Part::ToolResult { content, .. } => count_text(content),
        // A PDF page is a few hundred tokens; its base64 size over sixteen is a fair stand-in
        // (what four characters a token over the decoded bytes would give).
        Part::Document { data_base64, .. } => (data_base64.len() / 16) as u64,
        Part::Image { .. } => IMAGE_TOKENS,
    }
}

/// Tokens a message's parts take.
pub fn count_parts(parts: &[Part]) -> u64 {
    parts.iter().map(count_part).fold(0, u64::saturating_add)
}

/// Tokens a whole request takes: system prompt, messages and tool definitions.
pub fn count_request(req: &ChatRequest) -> u64 {
    let system = req.system.as_deref().map_or(0, count_text);
    let messages = req.messages.iter().map(|m| count_parts(&m.parts)).fold(0, u64::saturating_add);
    let tools = req
        .tools
        .iter()
        .map(|t| count_text(&t.name) + count_text(&t.description) + count_text(&t.parameters.to_string()))
        .fold(0, u64::saturating_add);
    system.saturating_add(messages).saturating_add(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(text: &str) -> u64 {
        tiktoken_rs::o200k_base_singleton().encode_ordinary(text).len() as u64
    }

    #[test]
    fn every_rank_of_the_file_is_loaded_and_found_by_its_bytes() {
        assert_eq!(O200K.starts.len() - 1, 199_998);
        assert_eq!(O200K.by_bytes.len(), 199_998, "no empty or duplicate token");
        let reference = tiktoken_rs::o200k_base_singleton();
        for rank in [0u32, 1, 255, 256, 1000, 100_000, 199_997] {
            let bytes = O200K.bytes(rank);
            assert_eq!(reference.decode_bytes(&[rank]).unwrap(), bytes, "rank {rank}");
            assert_eq!(O200K.rank(bytes), Some(rank));
        }
    }

    #[test]
    fn counts_as_openai_s_tiktoken_does_token_for_token() {
        assert_eq!(count_text(""), 0);
        assert_eq!(count_text("hello world"), 2);
        let samples = [
            "Hello, world!",
            "The quick brown fox jumps over the lazy dog.\n\nIt's 2026; we'll see.",
            "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n",
            "Numbers: 1234567890 3.14159 -42 1e10 0xDEADBEEF",
            "Ünïcödé: naïve café, 日本語のテキスト, 中文文本, Русский текст, العربية, emoji 🎉🚀👩‍👩‍👧",
            "   leading and trailing spaces   \t\ttabs\r\nwindows lines\n\n\n",
            "<|endoftext|> special tokens are ordinary text here <|endofprompt|>",
            "CamelCaseIdentifiers and snake_case_names, SHOUTING WORDS, I'm, you're, they've, he'd",
            "https://example.com/path?query=1&b=2#frag user@example.org",
            "{\"json\": [1, 2, {\"nested\": true}], \"s\": \"x\\ny\"}",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "Mixed\u{00A0}non-breaking\u{2003}spaces and ‘curly’ “quotes” — dashes … ellipses",
        ];
        for text in samples {
            assert_eq!(count_text(text), reference(text), "{text:?}");
        }
        let readme = include_str!("../../README.md");
        let code = include_str!("../domain/runs/stream.rs");
        assert_eq!(count_text(readme), reference(readme));
        assert_eq!(count_text(code), reference(code));
    }

    #[test]
    fn random_text_of_every_kind_of_character_counts_as_tiktoken_does() {
        // Characters from every branch of the pre-split: cases, marks, digits of several
        // scripts, symbols, apostrophes and contractions, every kind of space and newline.
        let pool: Vec<char> = "aAbZsStTmMdDlLrRvVeEſ'’ \t\r\n\u{a0}\u{2003}\u{85}0189٣৭Ⅻ½!?/.,;:-_()[]{}<>\"#$%&*+=@^`|~\\éÉßǅʰǂ\u{301}\u{93f}ा日本語テキストРусскийعربي한국어🎉👍🏽\u{200d}\u{fe0f}"
            .chars()
            .collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for round in 0..400 {
            let len = 1 + round % 60;
            let text: String = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    pool[(seed % pool.len() as u64) as usize]
                })
                .collect();
            assert_eq!(count_text(&text), reference(&text), "{text:?}");
        }
    }

    #[test]
    fn a_long_text_is_sampled_and_scaled_close_to_its_true_count() {
        let sentence = "The quick brown fox jumps over the lazy dog, again and again. ";
        let long = sentence.repeat(20_000); // ~1.2 MB
        let exact = reference(&long);
        let counted = count_text(&long);
        let off = counted.abs_diff(exact) as f64 / exact as f64;
        assert!(off < 0.02, "sampled {counted} vs exact {exact}");
        // Multi-byte text is cut on a character boundary.
        let wide = "näive café ☕ ".repeat(40_000);
        assert!(count_text(&wide) > 0);
    }

    #[test]
    fn one_endless_word_is_counted_in_slices_and_stays_close() {
        // A hostile message: 200 KB without a space is one pre-split piece.
        let word: String = (0..200_000).map(|i| char::from(b'a' + (i * 7 % 26) as u8)).collect();
        let counted = count_text(&word);
        let exact = reference(&word);
        let off = counted.abs_diff(exact) as f64 / exact as f64;
        assert!(off < 0.05, "sliced {counted} vs exact {exact}");
    }

    #[test]
    fn parts_and_requests_count_every_kind() {
        let parts = vec![
            Part::Text { text: "hello world".into() },
            Part::Image { mime: "image/png".into(), data_base64: "AAAA".into() },
            Part::ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: serde_json::json!({"path": "a.txt"}),
                signature: None,
            },
        ];
        let n = count_parts(&parts);
        assert!(n > IMAGE_TOKENS + 2, "{n}");
        let req = ChatRequest {
            model: "m".into(),
            system: Some("You are terse.".into()),
            messages: vec![crate::providers::types::ChatMessage {
                role: crate::providers::types::ChatRole::User,
                parts,
            }],
            tools: Vec::new(),
            params: crate::providers::types::GenParams::default(),
            passthrough: None,
        };
        assert!(count_request(&req) > n);
    }
}
