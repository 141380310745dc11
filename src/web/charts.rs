//! Server-side SVG charts for the admin usage page: inline `<svg>` strings, no JavaScript, std
//! only.
//!
//! The output is marked safe in templates, so every piece of text that reaches the SVG (title,
//! labels, unit, formatted values) goes through [`escape_into`] here; labels are user data (emails,
//! model names). Colours come from the CSS classes `chart-bar`, `chart-grid`, `chart-axis` and
//! `chart-label`, with `currentColor` presentation attributes as the fallback, and nothing uses a
//! `style` attribute (the CSP forbids inline styles). Sizes are in viewBox units and the SVG is
//! `width="100%"`, so it scales with its container.

use super::escape::escape_into;
use std::fmt::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

/// One bar: its label under the axis (e.g. "11-23") and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Shown under the axis (or beside the bar in a ranking) and in the tooltip.
    pub label: String,
    /// The bar's value; NaN, infinite and negative values are drawn as 0.
    pub value: f64,
}

impl Bar {
    /// A bar from its label and value.
    pub fn new(label: impl Into<String>, value: f64) -> Self {
        Self { label: label.into(), value }
    }
}

/// The viewBox width of every chart.
const WIDTH: f64 = 640.0;
/// Font size of labels, in viewBox units.
const FONT_SIZE: f64 = 11.0;
/// Rough advance of one character at [`FONT_SIZE`], to reserve room for labels.
const CHAR_W: f64 = 6.6;
/// At most this many labels under a bar chart's axis; the rest are thinned out.
const MAX_X_LABELS: usize = 12;
/// Labels beside a ranking's bars are cut to this many characters (the tooltip keeps all of it).
const MAX_RANK_LABEL_CHARS: usize = 28;
/// Shown instead of bars when there is nothing to draw.
const NO_DATA: &str = "No data for this period";

/// Distinguishes the `<title>`/`<desc>` ids of several charts on one page.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Renders a vertical bar chart as an inline <svg> string.
pub fn bar_chart(title: &str, unit: &str, bars: &[Bar]) -> String {
    const HEIGHT: f64 = 220.0;
    const TOP: f64 = 12.0;
    const BOTTOM: f64 = 194.0;
    const RIGHT: f64 = WIDTH - 8.0;

    let values: Vec<f64> = bars.iter().map(|b| clean(b.value)).collect();
    let max = values.iter().copied().fold(0.0, f64::max);
    if max <= 0.0 {
        return empty_chart("chart-columns", title, HEIGHT);
    }
    let ticks = Ticks::for_max(max);
    let tick_labels: Vec<String> = (0..=ticks.count).map(|i| format_value(ticks.value(i), unit)).collect();
    let left = (longest(&tick_labels) as f64 * CHAR_W + 10.0).max(36.0);
    let plot_h = BOTTOM - TOP;
    let y_of = |v: f64| BOTTOM - v / ticks.top() * plot_h;

    let mut out = String::with_capacity(1024 + bars.len() * 200);
    open_svg(&mut out, "chart-columns", HEIGHT, title, &describe(bars, &values, unit));

    for (i, label) in tick_labels.iter().enumerate() {
        let y = y_of(ticks.value(i));
        if i > 0 {
            grid_line(&mut out, left, y, RIGHT, y);
        }
        text(&mut out, "chart-label chart-y", left - 6.0, y + 4.0, "end", label);
    }
    axis_line(&mut out, left, BOTTOM, RIGHT, BOTTOM);

    let slot = (RIGHT - left) / bars.len() as f64;
    let bar_w = (slot * 0.75).min(56.0);
    for (i, (bar, &value)) in bars.iter().zip(&values).enumerate() {
        let x = left + i as f64 * slot + (slot - bar_w) / 2.0;
        let y = y_of(value);
        rect(&mut out, x, y, bar_w, BOTTOM - y, bar, value, unit);
    }

    // Every `step`-th label, so at most MAX_X_LABELS of them, each cut to the room it has.
    let step = bars.len().div_ceil(MAX_X_LABELS);
    let max_chars = ((step as f64 * slot / CHAR_W) as usize).saturating_sub(1).max(4);
    for (i, bar) in bars.iter().enumerate().step_by(step) {
        let x = left + (i as f64 + 0.5) * slot;
        text(&mut out, "chart-label chart-x", x, BOTTOM + 16.0, "middle", &truncate(&bar.label, max_chars));
    }

    out.push_str("</svg>");
    out
}

/// Renders horizontal bars (for "per user" / "per model" rankings), longest first as given.
pub fn ranking_chart(title: &str, unit: &str, bars: &[Bar]) -> String {
    const TOP: f64 = 8.0;
    const ROW_H: f64 = 24.0;
    const BAR_H: f64 = 16.0;

    let values: Vec<f64> = bars.iter().map(|b| clean(b.value)).collect();
    let max = values.iter().copied().fold(0.0, f64::max);
    if max <= 0.0 {
        return empty_chart("chart-ranking", title, 120.0);
    }
    let ticks = Ticks::for_max(max);
    let tick_labels: Vec<String> = (0..=ticks.count).map(|i| format_value(ticks.value(i), unit)).collect();
    let labels: Vec<String> = bars.iter().map(|b| truncate(&b.label, MAX_RANK_LABEL_CHARS)).collect();
    let value_labels: Vec<String> = values.iter().map(|&v| format_value(v, unit)).collect();

    let left = (longest(&labels) as f64 * CHAR_W + 12.0).clamp(40.0, 240.0);
    let last_tick_half = tick_labels.last().map_or(0, |l| l.chars().count()) as f64 * CHAR_W / 2.0;
    let right_pad = (longest(&value_labels) as f64 * CHAR_W + 10.0).max(last_tick_half + 4.0);
    let right = WIDTH - right_pad;
    let plot_w = right - left;
    let bottom = TOP + bars.len() as f64 * ROW_H;
    let height = bottom + 24.0;
    let x_of = |v: f64| left + v / ticks.top() * plot_w;

    let mut out = String::with_capacity(1024 + bars.len() * 300);
    open_svg(&mut out, "chart-ranking", height, title, &describe(bars, &values, unit));

    for (i, label) in tick_labels.iter().enumerate() {
        let x = x_of(ticks.value(i));
        if i > 0 {
            grid_line(&mut out, x, TOP, x, bottom);
        }
        text(&mut out, "chart-label chart-x", x, bottom + 16.0, "middle", label);
    }
    axis_line(&mut out, left, TOP, left, bottom);

    for (i, (bar, &value)) in bars.iter().zip(&values).enumerate() {
        let row_y = TOP + i as f64 * ROW_H;
        let text_y = row_y + ROW_H / 2.0 + 4.0;
        let w = x_of(value) - left;
        text(&mut out, "chart-label chart-y", left - 8.0, text_y, "end", &labels[i]);
        rect(&mut out, left, row_y + (ROW_H - BAR_H) / 2.0, w, BAR_H, bar, value, unit);
        text(&mut out, "chart-label chart-value", left + w + 6.0, text_y, "start", &value_labels[i]);
    }

    out.push_str("</svg>");
    out
}

/// Formats a value with the unit for axis labels and tooltips: 1234567 tokens -> "1.2M tokens", dollars "$12.34".
///
/// The result is plain text, not escaped. Unit `"$"` gives dollars with cents and thousands
/// separators; any other unit is appended after a space, with k/M/B suffixes from 1000 on.
pub fn format_value(value: f64, unit: &str) -> String {
    let value = if value.is_finite() { value } else { 0.0 };
    if unit == "$" {
        return format_dollars(value);
    }
    let number = format_compact(value);
    if unit.is_empty() { number } else { format!("{number} {unit}") }
}

/// `-$1,234.50`: cents, rounded, with comma-grouped dollars.
fn format_dollars(value: f64) -> String {
    // Fractions of a cent (a few small calls) keep their first significant digits.
    if value != 0.0 && value.abs() < 0.005 {
        let sign = if value < 0.0 { "-" } else { "" };
        let digits = (-value.abs().log10()).ceil().clamp(3.0, 8.0) as usize + 1;
        return format!("{sign}${}", trim_zeros(format!("{:.*}", digits, value.abs())));
    }
    let cents = (value.abs() * 100.0).round() as u64;
    let sign = if value < 0.0 && cents > 0 { "-" } else { "" };
    format!("{sign}${}.{:02}", group_thousands(cents / 100), cents % 100)
}

/// `12,345,678`.
fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `999`, `7.5`, `0.25`, `1k`, `1.2M`, `2.5B`: up to two decimals below 1000, one with a suffix.
fn format_compact(value: f64) -> String {
    let abs = value.abs();
    let hundredths = (abs * 100.0).round() / 100.0;
    let (digits, suffix) = if hundredths < 1000.0 {
        (trim_zeros(format!("{hundredths:.2}")), "")
    } else {
        // The first suffix whose rounded figure stays under 1000, so 999_950 reads "1M", not "1000k".
        let mut chosen = (abs / 1e9, "B");
        for (div, suffix) in [(1e3, "k"), (1e6, "M")] {
            if ((abs / div) * 10.0).round() / 10.0 < 1000.0 {
                chosen = (abs / div, suffix);
                break;
            }
        }
        (trim_zeros(format!("{:.1}", chosen.0)), chosen.1)
    };
    let sign = if value < 0.0 && digits != "0" { "-" } else { "" };
    format!("{sign}{digits}{suffix}")
}

/// `"2.50"` -> `"2.5"`, `"3.00"` -> `"3"`.
fn trim_zeros(s: String) -> String {
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_owned() } else { s }
}

/// The y (or x) axis: `count` equal steps of `step` from 0 to the first tick at or above the maximum.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ticks {
    step: f64,
    count: usize,
}

impl Ticks {
    /// The smallest step of 1, 2, 2.5 or 5 × 10^n that covers `max` (> 0) in at most 4 steps.
    ///
    /// Each candidate is at most twice the one before, so the chosen step always needs 3 or 4
    /// intervals: 4 or 5 ticks counting the zero baseline. E.g. 873 -> 0, 250, 500, 750, 1000.
    fn for_max(max: f64) -> Self {
        let base = 10f64.powf((max / 4.0).log10().floor());
        for mantissa in [1.0, 2.0, 2.5, 5.0, 10.0] {
            let step = mantissa * base;
            // The epsilon keeps 1000 / 250 at 4 steps despite rounding in the division.
            let count = (max / step - 1e-9).ceil().max(1.0);
            if count <= 4.0 {
                return Self { step, count: count as usize };
            }
        }
        // Unreachable for finite max > 0: 10 × base > max / 4.
        Self { step: max, count: 1 }
    }

    /// The value at tick `i` (0 is the baseline).
    fn value(self, i: usize) -> f64 {
        self.step * i as f64
    }

    /// The value at the last tick: the top of the scale.
    fn top(self) -> f64 {
        self.value(self.count)
    }
}

/// Values that can be drawn: NaN, infinite and negative ones become 0.
fn clean(value: f64) -> f64 {
    if value.is_finite() && value > 0.0 { value } else { 0.0 }
}

/// The length in characters of the longest string.
fn longest(labels: &[String]) -> usize {
    labels.iter().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// `label` cut to `max` characters, ending in an ellipsis when cut.
fn truncate(label: &str, max: usize) -> String {
    if label.chars().count() <= max {
        return label.to_owned();
    }
    let mut cut: String = label.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The `<desc>`: how many bars, the highest and the total, for screen readers.
fn describe(bars: &[Bar], values: &[f64], unit: &str) -> String {
    let total: f64 = values.iter().sum();
    let highest = bars.iter().zip(values).fold(None::<(&Bar, f64)>, |best, (bar, &value)| match best {
        Some((_, best_value)) if best_value >= value => best,
        _ => Some((bar, value)),
    });
    let mut desc = format!("{} values, total {}", bars.len(), format_value(total, unit));
    if let Some((bar, value)) = highest {
        let _ = write!(desc, "; highest {}: {}", bar.label, format_value(value, unit));
    }
    desc
}

/// Writes the opening `<svg>` with its `<title>` and `<desc>`.
fn open_svg(out: &mut String, kind: &str, height: f64, title: &str, desc: &str) {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart {kind}\" viewBox=\"0 0 {} {}\" \
         width=\"100%\" role=\"img\" aria-labelledby=\"chart-{id}-title chart-{id}-desc\" \
         font-size=\"{FONT_SIZE}\"><title id=\"chart-{id}-title\">",
        Num(WIDTH),
        Num(height),
    );
    escape_into(out, title);
    let _ = write!(out, "</title><desc id=\"chart-{id}-desc\">");
    escape_into(out, desc);
    out.push_str("</desc>");
}

/// The chart shown for no bars or all-zero values: a baseline and [`NO_DATA`].
fn empty_chart(kind: &str, title: &str, height: f64) -> String {
    let mut out = String::with_capacity(512);
    open_svg(&mut out, kind, height, title, NO_DATA);
    axis_line(&mut out, 8.0, height - 24.0, WIDTH - 8.0, height - 24.0);
    text(&mut out, "chart-label chart-empty", WIDTH / 2.0, height / 2.0, "middle", NO_DATA);
    out.push_str("</svg>");
    out
}

/// One bar, with a `<title>` tooltip "label: value".
#[allow(clippy::too_many_arguments)]
fn rect(out: &mut String, x: f64, y: f64, w: f64, h: f64, bar: &Bar, value: f64, unit: &str) {
    let _ = write!(
        out,
        "<rect class=\"chart-bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"currentColor\"><title>",
        Num(x),
        Num(y),
        Num(w.max(0.0)),
        Num(h.max(0.0)),
    );
    escape_into(out, &bar.label);
    out.push_str(": ");
    escape_into(out, &format_value(value, unit));
    out.push_str("</title></rect>");
}

/// A gridline: faint `currentColor` unless the stylesheet says otherwise.
fn grid_line(out: &mut String, x1: f64, y1: f64, x2: f64, y2: f64) {
    line(out, "chart-grid", "0.15", x1, y1, x2, y2);
}

/// The baseline (or, in a ranking, the vertical axis).
fn axis_line(out: &mut String, x1: f64, y1: f64, x2: f64, y2: f64) {
    line(out, "chart-axis", "0.5", x1, y1, x2, y2);
}

/// A `<line>` in `currentColor` at the given opacity, which the class may override.
fn line(out: &mut String, class: &str, opacity: &str, x1: f64, y1: f64, x2: f64, y2: f64) {
    let _ = write!(
        out,
        "<line class=\"{class}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"currentColor\" \
         stroke-opacity=\"{opacity}\"/>",
        Num(x1),
        Num(y1),
        Num(x2),
        Num(y2),
    );
}

/// A `<text>` with escaped content.
fn text(out: &mut String, class: &str, x: f64, y: f64, anchor: &str, content: &str) {
    let _ = write!(
        out,
        "<text class=\"{class}\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\" fill=\"currentColor\">",
        Num(x),
        Num(y),
    );
    escape_into(out, content);
    out.push_str("</text>");
}

/// A coordinate, rounded to one decimal without a trailing `.0` (and never `-0`).
struct Num(f64);

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rounded = (self.0 * 10.0).round() / 10.0;
        if rounded.fract() == 0.0 { write!(f, "{}", rounded as i64) } else { write!(f, "{rounded:.1}") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_of_a_cent_stay_visible() {
        assert_eq!(format_value(0.000_25, "$"), "$0.00025");
        assert_eq!(format_value(0.003, "$"), "$0.003");
        assert_eq!(format_value(0.0, "$"), "$0.00");
        assert_eq!(format_value(0.01, "$"), "$0.01");
    }

    /// A small well-formedness check: one `<svg>` root, balanced tags, quoted attributes, only the
    /// five entities this module writes, and no stray `<` or `>` in text.
    fn assert_well_formed(svg: &str) {
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" "), "{svg}");
        assert!(svg.ends_with("</svg>"), "{svg}");
        assert_eq!(svg.matches("<svg").count(), 1);
        assert_eq!(svg.matches("</svg>").count(), 1);
        for (i, _) in svg.match_indices('&') {
            let rest = &svg[i + 1..];
            assert!(
                ["amp;", "lt;", "gt;", "quot;", "#39;"].iter().any(|e| rest.starts_with(e)),
                "bare & at {i}: {}",
                &svg[i..(i + 20).min(svg.len())]
            );
        }
        let mut stack: Vec<&str> = Vec::new();
        let mut rest = svg;
        let mut roots = 0;
        while let Some(start) = rest.find('<') {
            assert!(!rest[..start].contains('>'), "stray > in text: {}", &rest[..start]);
            assert!(!stack.is_empty() || start == 0, "text outside the root");
            let end = start + rest[start..].find('>').expect("unclosed tag");
            let tag = &rest[start + 1..end];
            assert!(!tag.contains('<'), "< inside tag: {tag}");
            assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes: {tag}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop(), Some(name), "mismatched close tag");
            } else {
                if stack.is_empty() {
                    roots += 1;
                }
                if !tag.ends_with('/') {
                    stack.push(tag.split_whitespace().next().expect("tag name"));
                }
            }
            rest = &rest[end + 1..];
        }
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        assert!(rest.is_empty(), "text after the root: {rest}");
        assert_eq!(roots, 1);
    }

    fn bars(values: &[f64]) -> Vec<Bar> {
        values.iter().enumerate().map(|(i, &v)| Bar::new(format!("11-{:02}", i + 1), v)).collect()
    }

    #[test]
    fn escapes_every_piece_of_text() {
        let evil = "<script>alert(1)</script>&\"'";
        let data = vec![Bar::new(evil, 5.0), Bar::new("ok", 3.0)];
        for svg in [bar_chart(evil, evil, &data), ranking_chart(evil, evil, &data)] {
            assert!(!svg.contains("<script"), "{svg}");
            assert!(!svg.contains("</script"), "{svg}");
            assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&#39;"), "{svg}");
            assert_well_formed(&svg);
        }
        // The empty chart escapes its title too.
        let svg = bar_chart(evil, "tokens", &[]);
        assert!(!svg.contains("<script"));
        assert_well_formed(&svg);
    }

    #[test]
    fn drops_characters_xml_forbids() {
        let svg = ranking_chart("t", "", &[Bar::new("a\u{0}b\u{1b}c\u{FFFF}", 1.0)]);
        assert!(svg.contains(">abc<"), "{svg}");
        assert_well_formed(&svg);
    }

    #[test]
    fn empty_and_all_zero_data_say_so() {
        for data in [vec![], bars(&[0.0, 0.0, 0.0])] {
            for svg in [bar_chart("Tokens", "tokens", &data), ranking_chart("Users", "$", &data)] {
                assert!(svg.contains(NO_DATA), "{svg}");
                assert!(!svg.contains("chart-bar"), "{svg}");
                assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
                assert_well_formed(&svg);
            }
        }
    }

    #[test]
    fn nan_negative_and_infinite_values_are_zero() {
        let data = bars(&[f64::NAN, -5.0, f64::INFINITY, f64::NEG_INFINITY, 10.0]);
        for svg in [bar_chart("t", "tokens", &data), ranking_chart("t", "tokens", &data)] {
            assert_eq!(svg.matches("<rect class=\"chart-bar\"").count(), 5);
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
            assert!(!svg.contains("=\"-"), "negative coordinate or size: {svg}");
            assert!(svg.contains("<title>11-01: 0 tokens</title>"), "{svg}");
            assert!(svg.contains("<title>11-05: 10 tokens</title>"), "{svg}");
            assert_well_formed(&svg);
        }
        let svg = bar_chart("t", "tokens", &bars(&[f64::NAN, f64::INFINITY]));
        assert!(svg.contains(NO_DATA));
    }

    #[test]
    fn ninety_bars_show_at_most_twelve_labels() {
        let values: Vec<f64> = (0..90).map(|i| f64::from(i * 37 % 1000)).collect();
        let svg = bar_chart("Daily tokens", "tokens", &bars(&values));
        assert_eq!(svg.matches("<rect class=\"chart-bar\"").count(), 90);
        assert_eq!(svg.matches("<title").count(), 91, "one tooltip per bar plus the chart title");
        let labels = svg.matches("class=\"chart-label chart-x\"").count();
        assert!((1..=MAX_X_LABELS).contains(&labels), "{labels} labels");
        assert_well_formed(&svg);
    }

    #[test]
    fn few_bars_show_every_label() {
        let svg = bar_chart("t", "requests", &bars(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]));
        assert_eq!(svg.matches("class=\"chart-label chart-x\"").count(), 7);
        assert_well_formed(&svg);
    }

    #[test]
    fn y_axis_uses_nice_ticks_and_formatted_labels() {
        let svg = bar_chart("t", "tokens", &bars(&[873.0, 12.0]));
        for label in ["0 tokens", "250 tokens", "500 tokens", "750 tokens", "1k tokens"] {
            assert!(svg.contains(&format!(">{label}</text>")), "{label} missing: {svg}");
        }
        assert_eq!(svg.matches("class=\"chart-grid\"").count(), 4);
    }

    #[test]
    fn nice_tick_rule() {
        assert_eq!(Ticks::for_max(873.0), Ticks { step: 250.0, count: 4 });
        assert_eq!(Ticks::for_max(1000.0), Ticks { step: 250.0, count: 4 });
        assert_eq!(Ticks::for_max(1001.0), Ticks { step: 500.0, count: 3 });
        assert_eq!(Ticks::for_max(7.0), Ticks { step: 2.0, count: 4 });
        assert_eq!(Ticks::for_max(1.0), Ticks { step: 0.25, count: 4 });
        assert_eq!(Ticks::for_max(1_234_567.0), Ticks { step: 500_000.0, count: 3 });
        // Across twelve orders of magnitude: 3 or 4 steps of 1/2/2.5/5 × 10^n, covering the maximum.
        let mut max = 0.001;
        while max < 1e12 {
            let ticks = Ticks::for_max(max);
            assert!((3..=4).contains(&ticks.count), "{max}: {ticks:?}");
            assert!(ticks.top() >= max * (1.0 - 1e-9), "{max}: {ticks:?}");
            let mantissa = ticks.step / 10f64.powf(ticks.step.log10().floor());
            assert!(
                [1.0, 2.0, 2.5, 5.0, 10.0].iter().any(|m| (mantissa - m).abs() < 1e-6),
                "{max}: {ticks:?}"
            );
            max *= 1.0371;
        }
    }

    #[test]
    fn format_value_cases() {
        assert_eq!(format_value(1_234_567.0, "tokens"), "1.2M tokens");
        assert_eq!(format_value(0.0, "tokens"), "0 tokens");
        assert_eq!(format_value(999.0, "tokens"), "999 tokens");
        assert_eq!(format_value(1000.0, "tokens"), "1k tokens");
        assert_eq!(format_value(2500.0, "tokens"), "2.5k tokens");
        assert_eq!(format_value(999_950.0, "tokens"), "1M tokens");
        assert_eq!(format_value(2_500_000_000.0, "tokens"), "2.5B tokens");
        assert_eq!(format_value(7.5, ""), "7.5");
        assert_eq!(format_value(0.25, "requests"), "0.25 requests");
        assert_eq!(format_value(-1500.0, "tokens"), "-1.5k tokens");
        assert_eq!(format_value(f64::NAN, "tokens"), "0 tokens");
        assert_eq!(format_value(12.34, "$"), "$12.34");
        assert_eq!(format_value(0.0, "$"), "$0.00");
        assert_eq!(format_value(0.5, "$"), "$0.50");
        assert_eq!(format_value(1234.5, "$"), "$1,234.50");
        assert_eq!(format_value(1_234_567.891, "$"), "$1,234,567.89");
        assert_eq!(format_value(-3.0, "$"), "-$3.00");
        assert_eq!(format_value(f64::INFINITY, "$"), "$0.00");
    }

    #[test]
    fn ranking_keeps_order_and_cuts_long_labels() {
        let long = "someone.with.a.very.long.address@example.com";
        let data = vec![Bar::new(long, 12.5), Bar::new("b@example.com", 3.0), Bar::new("c", 0.0)];
        let svg = ranking_chart("Cost per user", "$", &data);
        assert_eq!(svg.matches("<rect class=\"chart-bar\"").count(), 3);
        let first = svg.find(">someone.with").expect("first row");
        let second = svg.find(">b@example.com</text>").expect("second row");
        assert!(first < second);
        assert!(svg.contains(&format!("<title>{long}: $12.50</title>")), "full label in the tooltip");
        assert!(svg.contains(&format!(">{}</text>", truncate(long, MAX_RANK_LABEL_CHARS))));
        assert!(svg.contains(">$12.50</text>"));
        assert_well_formed(&svg);
    }

    #[test]
    fn svg_is_responsive_and_labelled() {
        let svg = bar_chart("Daily cost", "$", &bars(&[1.0, 2.0]));
        assert!(svg.contains("width=\"100%\""));
        assert!(svg.contains("viewBox=\"0 0 640 220\""));
        assert!(svg.contains("role=\"img\""));
        let id = svg.split("aria-labelledby=\"").nth(1).and_then(|s| s.split(' ').next()).expect("id");
        assert!(svg.contains(&format!("<title id=\"{id}\">Daily cost</title>")), "{svg}");
        assert!(!svg.contains("style="), "the CSP forbids inline styles");
        let other = bar_chart("Daily cost", "$", &bars(&[1.0, 2.0]));
        assert!(!other.contains(&format!("\"{id}\"")), "ids are unique per chart");
    }
}
