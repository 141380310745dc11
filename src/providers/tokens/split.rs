//! o200k_base's pre-split, without a regular-expression engine. The pattern tiktoken uses is
//!
//! ```text
//! 1  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! 2 |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! 3 |\p{N}{1,3}
//! 4 | ?[^\s\p{L}\p{N}]+[\r\n/]*
//! 5 |\s*[\r\n]+
//! 6 |\s+(?!\S)
//! 7 |\s+
//! ```
//!
//! Every character starts a match of some branch, so the pieces tile the text and each starts
//! where the last ended; at each start the branches are tried in order, each with the
//! backtracking a regex engine would do (worked out per branch below). Compiled by a regex
//! engine, the Unicode classes alone cost about 6 MB of automata; here they are lookups in
//! the general-category tables already in the binary.

use unicode_properties::{GeneralCategory as G, GeneralCategoryGroup as Group, UnicodeGeneralCategory};

/// The pieces of `text`, in order; together they are `text`.
pub(super) fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let rest = text.get(at..).filter(|r| !r.is_empty())?;
        let len = piece_len(rest).clamp(1, rest.len());
        // Lengths are sums of whole characters' lengths, so `len` is a boundary; a slip would
        // end the split rather than panic.
        let piece = rest.get(..len)?;
        at += len;
        Some(piece)
    })
}

/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`: letters that may start a word in capitals, and marks.
fn upper(c: char) -> bool {
    matches!(
        c.general_category(),
        G::UppercaseLetter | G::TitlecaseLetter | G::ModifierLetter | G::OtherLetter
    ) || mark(c)
}

/// `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
fn lower(c: char) -> bool {
    matches!(c.general_category(), G::LowercaseLetter | G::ModifierLetter | G::OtherLetter) || mark(c)
}

fn mark(c: char) -> bool {
    c.general_category_group() == Group::Mark
}

fn letter(c: char) -> bool {
    c.general_category_group() == Group::Letter
}

fn number(c: char) -> bool {
    c.general_category_group() == Group::Number
}

/// `\s` in Unicode mode: the White_Space property, which is what `char::is_whitespace` tests.
fn space(c: char) -> bool {
    c.is_whitespace()
}

fn newline(c: char) -> bool {
    c == '\r' || c == '\n'
}

/// `[^\r\n\p{L}\p{N}]`: the one character a word may carry in front (a space, a quote…).
fn prefix(c: char) -> bool {
    !newline(c) && !letter(c) && !number(c)
}

/// Bytes of the longest run at the start of `s` whose characters all pass `class`.
fn run(s: &str, class: fn(char) -> bool) -> usize {
    s.char_indices().find(|&(_, c)| !class(c)).map_or(s.len(), |(i, _)| i)
}

/// Bytes of the first character of `s` (0 when empty).
fn first_len(s: &str) -> usize {
    s.chars().next().map_or(0, char::len_utf8)
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` at the start of `s`: its length. Case-insensitive matching
/// uses Unicode simple case folding, under which `s` also matches `ſ` (U+017F).
fn contraction(s: &str) -> usize {
    let Some(rest) = s.strip_prefix('\'') else { return 0 };
    let mut chars = rest.chars();
    let (a, b) = (chars.next(), chars.next());
    let is = |c: Option<char>, ascii: char| c.is_some_and(|c| c.eq_ignore_ascii_case(&ascii));
    let one = |c: char| 1 + c.len_utf8();
    match a {
        Some(c @ ('s' | 'S' | 'ſ' | 't' | 'T' | 'm' | 'M' | 'd' | 'D')) => one(c),
        Some(c) if (c.eq_ignore_ascii_case(&'r') || c.eq_ignore_ascii_case(&'v')) && is(b, 'e') => 3,
        Some(c) if c.eq_ignore_ascii_case(&'l') && is(b, 'l') => 3,
        _ => 0,
    }
}

/// Branch 1 after its optional prefix: `U*L+C?`. `U*` gives characters back, longest first,
/// until an `L` follows; `L+` then takes its whole run (nothing after it can fail).
fn word_lower(s: &str) -> Option<usize> {
    let uppers: Vec<usize> = std::iter::once(0)
        .chain(s.char_indices().take_while(|&(_, c)| upper(c)).map(|(i, c)| i + c.len_utf8()))
        .collect();
    uppers.iter().rev().find_map(|&k| {
        let lowers = run(&s[k..], lower);
        (lowers > 0).then(|| k + lowers + contraction(&s[k + lowers..]))
    })
}

/// Branch 2 after its optional prefix: `U+L*C?`.
fn word_upper(s: &str) -> Option<usize> {
    let uppers = run(s, upper);
    (uppers > 0).then(|| {
        let lowers = run(&s[uppers..], lower);
        uppers + lowers + contraction(&s[uppers + lowers..])
    })
}

/// A branch with the optional prefix: tried with it first, then without (a regex's `?`).
fn with_prefix(s: &str, c: char, tail: fn(&str) -> Option<usize>) -> Option<usize> {
    let with = prefix(c).then(|| tail(&s[c.len_utf8()..]).map(|n| c.len_utf8() + n)).flatten();
    with.or_else(|| tail(s))
}

/// Bytes of the piece that starts `s` (non-empty).
fn piece_len(s: &str) -> usize {
    let Some(c) = s.chars().next() else { return 0 };
    if let Some(n) = with_prefix(s, c, word_lower).or_else(|| with_prefix(s, c, word_upper)) {
        return n;
    }
    // 3: up to three digits.
    if number(c) {
        return s
            .char_indices()
            .take(3)
            .take_while(|&(_, c)| number(c))
            .map(|(i, c)| i + c.len_utf8())
            .last()
            .unwrap_or(0);
    }
    // 4: ` ?` then punctuation and symbols, then trailing newlines and slashes.
    let symbol = |c: char| !space(c) && !letter(c) && !number(c);
    let lead = usize::from(c == ' ' && s[1..].chars().next().is_some_and(symbol));
    let symbols = run(&s[lead..], symbol);
    if symbols > 0 {
        let end = lead + symbols;
        return end + run(&s[end..], |c| newline(c) || c == '/');
    }
    // 5–7: whitespace. With a newline in the run, up to and including the last newline (5);
    // else the whole run when the text ends there, or all but the last character when more
    // than one precedes a non-space (6), or the one character (7).
    let spaces = run(s, space);
    if let Some((i, c)) = s[..spaces].char_indices().rev().find(|&(_, c)| newline(c)) {
        return i + c.len_utf8();
    }
    if spaces == s.len() {
        return spaces;
    }
    let last = s[..spaces].chars().next_back().map_or(0, char::len_utf8);
    if spaces > last { spaces - last } else { first_len(s).max(spaces) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<&str> {
        pieces(text).collect()
    }

    #[test]
    fn words_numbers_symbols_and_spaces_split_as_tiktoken_does() {
        assert_eq!(split("Hello world"), ["Hello", " world"]);
        assert_eq!(split("I'm HTTPServer's 12345 !!"), ["I'm", " HTTPServer's", " ", "123", "45", " !!"]);
        assert_eq!(split("a  b\n\n  c"), ["a", " ", " b", "\n\n", " ", " c"]);
        assert_eq!(split("end   "), ["end", "   "]);
        assert_eq!(split("x/\n/y"), ["x", "/\n/", "y"]);
    }
}
