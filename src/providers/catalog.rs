//! The model catalog: context windows, output limits, prices and capabilities per model.
//!
//! The curated list lives in `config/models.toml` and is compiled in ([`Catalog::builtin`]);
//! an operator's file in the same format can be laid over it ([`Catalog::merged_with`]).
//! [`Catalog::lookup`] always answers: dated or tagged ids match their base entry, and an
//! unknown model gets conservative defaults with `known = false`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// The curated catalog, embedded at build time.
const BUILTIN_TOML: &str = include_str!("../../config/models.toml");

/// Context window assumed for a model the catalog does not know, in tokens.
pub const DEFAULT_CONTEXT_WINDOW: u32 = 8192;

/// Output limit assumed for a model the catalog does not know, in tokens.
pub const DEFAULT_MAX_OUTPUT: u32 = 4096;

/// What Arbor knows about one model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelInfo {
    /// The provider's model id: the id looked up (without a leading `models/`), or the
    /// catalog id for [`Catalog::entries`].
    pub id: String,
    /// Human-readable name (the id when the model is unknown).
    pub label: String,
    /// Total tokens the model can attend to.
    pub context_window: u32,
    /// Most tokens one response may contain.
    pub max_output: u32,
    /// USD per million input tokens; `None` when unknown.
    pub input_per_mtok: Option<f64>,
    /// USD per million output tokens; `None` when unknown.
    pub output_per_mtok: Option<f64>,
    /// USD per million cached input tokens; `None` when unknown (input price applies).
    pub cached_per_mtok: Option<f64>,
    /// Accepts tool (function) definitions.
    pub tools: bool,
    /// Accepts images as input.
    pub vision: bool,
    /// Accepts a reasoning effort or thinking budget.
    pub reasoning: bool,
    /// `false` when the model is not in the catalog and conservative defaults were used.
    pub known: bool,
}

impl ModelInfo {
    /// The conservative defaults used for a model the catalog does not know.
    fn unknown(id: &str) -> ModelInfo {
        ModelInfo {
            id: id.to_owned(),
            label: id.to_owned(),
            context_window: DEFAULT_CONTEXT_WINDOW,
            max_output: DEFAULT_MAX_OUTPUT,
            input_per_mtok: None,
            output_per_mtok: None,
            cached_per_mtok: None,
            tools: false,
            vision: false,
            reasoning: false,
            known: false,
        }
    }

    /// Cost in micro-dollars (1e-6 USD), rounded to nearest; None when a needed price is unknown.
    ///
    /// `input_tokens` includes `cached_tokens`: the uncached part is charged at the input price,
    /// the cached part at the cached price (the input price when that is unknown), and the
    /// output at the output price. A price is needed only when its token count is non-zero.
    /// `cached_tokens` above `input_tokens` is capped at `input_tokens`.
    pub fn cost_micros(&self, input_tokens: u64, output_tokens: u64, cached_tokens: u64) -> Option<i64> {
        let cached = cached_tokens.min(input_tokens);
        let uncached = input_tokens - cached;
        let mut total = 0u128;
        if uncached > 0 {
            total += charge(uncached, self.input_per_mtok?);
        }
        if cached > 0 {
            total += charge(cached, self.cached_per_mtok.or(self.input_per_mtok)?);
        }
        if output_tokens > 0 {
            total += charge(output_tokens, self.output_per_mtok?);
        }
        // `total` is in 1e-12 USD; round half up to whole micro-dollars.
        let micros = (total + PRICE_SCALE / 2) / PRICE_SCALE;
        Some(i64::try_from(micros).unwrap_or(i64::MAX))
    }
}

/// Price units per micro-dollar: prices are kept to 1e-6 USD per million tokens, exactly.
const PRICE_SCALE: u128 = 1_000_000;

/// `tokens` at `per_mtok` USD per million tokens, in 1e-12 USD (exact integer arithmetic).
fn charge(tokens: u64, per_mtok: f64) -> u128 {
    // USD per million tokens is micro-dollars per token; scale to 1e-12 USD per token.
    // Prices are validated finite and >= 0; `as` saturates anything out of range.
    let per_token = (per_mtok * PRICE_SCALE as f64).round() as u128;
    u128::from(tokens).saturating_mul(per_token)
}

/// A provider wire-format family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// OpenAI Chat Completions / Responses.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini (Generative Language API).
    Gemini,
}

impl Family {
    /// The name used in configuration files: `openai`, `anthropic` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::OpenAi => "openai",
            Family::Anthropic => "anthropic",
            Family::Gemini => "gemini",
        }
    }
}

/// Why a catalog file was refused.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The text is not TOML.
    #[error("model catalog is not valid TOML: {0}")]
    Syntax(String),
    /// A top-level key other than `model`, or `model` that is not a list of tables.
    #[error("model catalog: {0}")]
    Layout(String),
    /// One `[[model]]` entry is wrong; `index` counts from 1 in file order.
    #[error("model catalog entry #{index} (id {id:?}): {problem}")]
    Entry {
        /// Position of the entry in the file, from 1.
        index: usize,
        /// The entry's id as written (empty when missing or not a string).
        id: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// The keys a `[[model]]` table may have.
const KEYS: [&str; 11] = [
    "provider",
    "id",
    "label",
    "context_window",
    "max_output",
    "input_per_mtok",
    "output_per_mtok",
    "cached_per_mtok",
    "tools",
    "vision",
    "reasoning",
];

/// Reads and checks one `[[model]]` table; the error is the problem, naming the key.
fn parse_entry(item: &toml::Value) -> Result<(Family, ModelInfo), String> {
    let Some(table) = item.as_table() else {
        return Err(format!("expected a [[model]] table (found {})", item.type_str()));
    };
    if let Some(key) = table.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("unknown key `{key}` (allowed: {})", KEYS.join(", ")));
    }
    let family = match required(table, "provider", toml::Value::as_str, "a string")? {
        "openai" => Family::OpenAi,
        "anthropic" => Family::Anthropic,
        "gemini" => Family::Gemini,
        other => {
            return Err(format!(
                "unknown `provider` {other:?} (expected \"openai\", \"anthropic\" or \"gemini\")"
            ));
        }
    };
    let id = required(table, "id", toml::Value::as_str, "a string")?;
    if id.is_empty() {
        return Err("`id` is empty".into());
    }
    if id.chars().any(char::is_whitespace) {
        return Err("`id` contains whitespace".into());
    }
    if id.starts_with("models/") {
        return Err("`id` must not start with `models/` (write the bare model id)".into());
    }
    let label = match optional(table, "label", toml::Value::as_str, "a string")? {
        Some(label) if label.trim().is_empty() => return Err("`label` is empty".into()),
        Some(label) => label,
        None => id,
    };
    let context_window = tokens(table, "context_window")?;
    let max_output = tokens(table, "max_output")?;
    if max_output > context_window {
        return Err(format!(
            "`max_output` ({max_output}) is larger than `context_window` ({context_window})"
        ));
    }
    let info = ModelInfo {
        id: id.to_owned(),
        label: label.to_owned(),
        context_window,
        max_output,
        input_per_mtok: price(table, "input_per_mtok")?,
        output_per_mtok: price(table, "output_per_mtok")?,
        cached_per_mtok: price(table, "cached_per_mtok")?,
        tools: flag(table, "tools")?,
        vision: flag(table, "vision")?,
        reasoning: flag(table, "reasoning")?,
        known: true,
    };
    Ok((family, info))
}

/// `table[key]` read with `get`; `None` when absent, an error naming `what` was expected.
fn optional<'a, T>(
    table: &'a toml::Table,
    key: &str,
    get: impl Fn(&'a toml::Value) -> Option<T>,
    what: &str,
) -> Result<Option<T>, String> {
    match table.get(key) {
        None => Ok(None),
        Some(value) => {
            get(value).map(Some).ok_or_else(|| format!("`{key}` must be {what} (found {})", value.type_str()))
        }
    }
}

/// Like [`optional`], but a missing key is an error.
fn required<'a, T>(
    table: &'a toml::Table,
    key: &str,
    get: impl Fn(&'a toml::Value) -> Option<T>,
    what: &str,
) -> Result<T, String> {
    optional(table, key, get, what)?.ok_or_else(|| format!("`{key}` is missing"))
}

/// A required token count: an integer from 1 to `u32::MAX`.
fn tokens(table: &toml::Table, key: &str) -> Result<u32, String> {
    let n = required(table, key, toml::Value::as_integer, "an integer")?;
    if n <= 0 {
        return Err(format!("`{key}` must be greater than 0, not {n}"));
    }
    u32::try_from(n).map_err(|_| format!("`{key}` is too large ({n}; at most {})", u32::MAX))
}

/// An optional price in USD per million tokens: a finite number >= 0 (integers allowed).
fn price(table: &toml::Table, key: &str) -> Result<Option<f64>, String> {
    let number = |v: &toml::Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
    let price = optional(table, key, number, "a number")?;
    match price {
        Some(p) if !(p.is_finite() && p >= 0.0) => {
            Err(format!("`{key}` must be a finite number >= 0, not {p}"))
        }
        _ => Ok(price),
    }
}

/// An optional boolean, false when absent.
fn flag(table: &toml::Table, key: &str) -> Result<bool, String> {
    Ok(optional(table, key, toml::Value::as_bool, "true or false")?.unwrap_or(false))
}

/// One catalog entry: the family it belongs to and what is known about it.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    /// The provider family.
    family: Family,
    /// The curated figures (`known` is always true).
    info: ModelInfo,
}

/// A set of curated models, in file order, unique per (family, id) ignoring ASCII case.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// The entries, in file order.
    entries: Vec<Entry>,
}

impl Catalog {
    /// Parses the catalog compiled into the binary (`config/models.toml`).
    pub fn builtin() -> Result<Catalog, CatalogError> {
        Catalog::from_toml(BUILTIN_TOML)
    }

    /// Parses a catalog in the `models.toml` format, refusing unknown keys and bad values.
    pub fn from_toml(text: &str) -> Result<Catalog, CatalogError> {
        let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            CatalogError::Syntax(e.message().trim_end().to_owned() + &span_suffix(text, e.span()))
        })?;
        let models = table.remove("model");
        if let Some(key) = table.keys().next() {
            return Err(CatalogError::Layout(format!(
                "unknown top-level key `{key}` (only [[model]] tables are allowed)"
            )));
        }
        let items = match models {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items,
            Some(other) => {
                return Err(CatalogError::Layout(format!(
                    "`model` must be a list of [[model]] tables (found {})",
                    other.type_str()
                )));
            }
        };
        let mut entries = Vec::with_capacity(items.len());
        let mut seen: HashMap<(Family, String), usize> = HashMap::new();
        for (i, item) in items.iter().enumerate() {
            let index = i + 1;
            let id = item.get("id").and_then(toml::Value::as_str).unwrap_or_default().to_owned();
            let bad = |problem: String| CatalogError::Entry { index, id: id.clone(), problem };
            let (family, info) = parse_entry(item).map_err(bad)?;
            if let Some(first) = seen.insert((family, info.id.to_ascii_lowercase()), index) {
                return Err(bad(format!("duplicate of entry #{first} for provider {}", family.as_str())));
            }
            entries.push(Entry { family, info });
        }
        Ok(Catalog { entries })
    }

    /// Entries of `overrides` replace same (family, id) entries in place; the others are added.
    ///
    /// Ids compare ASCII case-insensitively, as in [`Catalog::lookup`].
    pub fn merged_with(mut self, overrides: Catalog) -> Catalog {
        for entry in overrides.entries {
            let same =
                |e: &&mut Entry| e.family == entry.family && e.info.id.eq_ignore_ascii_case(&entry.info.id);
            match self.entries.iter_mut().find(same) {
                Some(existing) => *existing = entry,
                None => self.entries.push(entry),
            }
        }
        self
    }

    /// What is known about `model_id`: exact entry, else longest dated/tagged prefix, else defaults.
    ///
    /// A leading `models/` (Gemini's list ids) is ignored. Matching is ASCII case-insensitive.
    /// A catalog id matches a longer id only when the remainder starts with `-`, `@` or `:`,
    /// so `gpt-4.1` matches `gpt-4.1-2025-04-14` but not `gpt-4.10`. The returned `id` is
    /// the id asked about (without `models/`); the other figures are the entry's.
    pub fn lookup(&self, family: Family, model_id: &str) -> ModelInfo {
        let wanted = model_id.strip_prefix("models/").unwrap_or(model_id);
        let mut best: Option<&Entry> = None;
        for entry in self.entries.iter().filter(|e| e.family == family) {
            let id = entry.info.id.as_str();
            if id.eq_ignore_ascii_case(wanted) {
                best = Some(entry);
                break;
            }
            let is_prefix = wanted.len() > id.len()
                && wanted.is_char_boundary(id.len())
                && wanted[..id.len()].eq_ignore_ascii_case(id)
                && matches!(wanted.as_bytes()[id.len()], b'-' | b'@' | b':');
            if is_prefix && best.is_none_or(|b| id.len() > b.info.id.len()) {
                best = Some(entry);
            }
        }
        match best {
            Some(entry) => ModelInfo { id: wanted.to_owned(), ..entry.info.clone() },
            None => ModelInfo::unknown(wanted),
        }
    }

    /// The curated entries for `family`, in file order.
    pub fn entries(&self, family: Family) -> Vec<ModelInfo> {
        self.entries.iter().filter(|e| e.family == family).map(|e| e.info.clone()).collect()
    }
}

/// " (line L, column C)" for a byte span of `text`, or nothing when the span is unknown.
fn span_suffix(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    let Some(span) = span else { return String::new() };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!(" (line {line}, column {column})")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> Catalog {
        Catalog::builtin().expect("the embedded models.toml parses")
    }

    /// A one-entry catalog text with `extra` lines appended to the entry.
    fn one(id: &str, extra: &str) -> String {
        let head = "[[model]]\nprovider = \"openai\"\n";
        format!("{head}id = \"{id}\"\ncontext_window = 1000\nmax_output = 100\n{extra}\n")
    }

    fn priced(input: Option<f64>, output: Option<f64>, cached: Option<f64>) -> ModelInfo {
        ModelInfo {
            input_per_mtok: input,
            output_per_mtok: output,
            cached_per_mtok: cached,
            ..ModelInfo::unknown("m")
        }
    }

    fn entry_error(text: &str) -> (usize, String, String) {
        match Catalog::from_toml(text) {
            Err(CatalogError::Entry { index, id, problem }) => (index, id, problem),
            other => panic!("expected an entry error, got {other:?}"),
        }
    }

    #[test]
    fn builtin_parses_and_covers_all_families() {
        let catalog = builtin();
        for family in [Family::OpenAi, Family::Anthropic, Family::Gemini] {
            let entries = catalog.entries(family);
            assert!(!entries.is_empty(), "no entries for {family:?}");
            for info in &entries {
                assert!(info.known);
                assert!(info.input_per_mtok.is_some() && info.output_per_mtok.is_some(), "{}", info.id);
                assert!(info.max_output <= info.context_window, "{}", info.id);
            }
        }
        let ids: Vec<String> = catalog.entries(Family::OpenAi).into_iter().map(|m| m.id).collect();
        for id in
            ["gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4o", "gpt-4o-mini", "o3", "o4-mini", "gpt-5"]
        {
            assert!(ids.iter().any(|i| i == id), "missing {id}");
        }
        let ids: Vec<String> = catalog.entries(Family::Anthropic).into_iter().map(|m| m.id).collect();
        for id in
            ["claude-opus-4-1", "claude-opus-4", "claude-sonnet-4-5", "claude-sonnet-4", "claude-3-7-sonnet"]
        {
            assert!(ids.iter().any(|i| i == id), "missing {id}");
        }
        for id in ["claude-haiku-4-5", "claude-3-5-haiku"] {
            assert!(ids.iter().any(|i| i == id), "missing {id}");
        }
        let ids: Vec<String> = catalog.entries(Family::Gemini).into_iter().map(|m| m.id).collect();
        for id in ["gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-2.0-flash"] {
            assert!(ids.iter().any(|i| i == id), "missing {id}");
        }
    }

    #[test]
    fn entries_keep_file_order_and_family() {
        let catalog = builtin();
        let openai = catalog.entries(Family::OpenAi);
        assert_eq!(openai[0].id, "gpt-5");
        assert!(catalog.entries(Family::Gemini).iter().all(|m| m.id.starts_with("gemini-")));
    }

    #[test]
    fn exact_lookup() {
        let info = builtin().lookup(Family::OpenAi, "gpt-4.1");
        assert!(info.known);
        assert_eq!(info.id, "gpt-4.1");
        assert_eq!(info.label, "GPT-4.1");
        assert_eq!(info.context_window, 1_047_576);
        assert_eq!(info.max_output, 32_768);
        assert_eq!(info.input_per_mtok, Some(2.0));
        assert_eq!(info.output_per_mtok, Some(8.0));
        assert_eq!(info.cached_per_mtok, Some(0.5));
        assert!(info.tools && info.vision && !info.reasoning);
    }

    #[test]
    fn exact_lookup_is_per_family() {
        let catalog = builtin();
        assert!(!catalog.lookup(Family::Anthropic, "gpt-4.1").known);
        assert!(!catalog.lookup(Family::OpenAi, "gemini-2.5-pro").known);
    }

    #[test]
    fn dated_and_tagged_versions_match_their_base() {
        let catalog = builtin();
        let info = catalog.lookup(Family::Anthropic, "claude-sonnet-4-5-20250929");
        assert!(info.known);
        assert_eq!(info.id, "claude-sonnet-4-5-20250929");
        assert_eq!(info.label, "Claude Sonnet 4.5");
        assert_eq!(info.max_output, 64_000);

        assert_eq!(catalog.lookup(Family::OpenAi, "gpt-4.1-2025-04-14").label, "GPT-4.1");
        assert_eq!(
            catalog.lookup(Family::Gemini, "gemini-2.5-flash-preview-05-20").label,
            "Gemini 2.5 Flash"
        );
        assert_eq!(catalog.lookup(Family::Anthropic, "claude-sonnet-4-20250514").label, "Claude Sonnet 4");
        assert_eq!(catalog.lookup(Family::Anthropic, "claude-opus-4-0").label, "Claude Opus 4");
        assert_eq!(catalog.lookup(Family::Anthropic, "claude-3-7-sonnet-latest").label, "Claude Sonnet 3.7");
        assert_eq!(catalog.lookup(Family::OpenAi, "o3@2025").label, "o3");
        assert_eq!(catalog.lookup(Family::OpenAi, "gpt-4o:tag").label, "GPT-4o");
    }

    #[test]
    fn gemini_models_prefix_is_stripped() {
        let catalog = builtin();
        let info = catalog.lookup(Family::Gemini, "models/gemini-2.5-pro");
        assert!(info.known);
        assert_eq!(info.id, "gemini-2.5-pro");
        assert_eq!(info.label, "Gemini 2.5 Pro");
        let info = catalog.lookup(Family::Gemini, "models/gemini-2.0-flash-001");
        assert_eq!(info.label, "Gemini 2.0 Flash");
        assert_eq!(info.id, "gemini-2.0-flash-001");
        let unknown = catalog.lookup(Family::Gemini, "models/gemma-3-27b-it");
        assert!(!unknown.known);
        assert_eq!(unknown.id, "gemma-3-27b-it");
    }

    #[test]
    fn unknown_model_gets_conservative_defaults() {
        let info = builtin().lookup(Family::OpenAi, "my-local-llama");
        assert_eq!(
            info,
            ModelInfo {
                id: "my-local-llama".into(),
                label: "my-local-llama".into(),
                context_window: 8192,
                max_output: 4096,
                input_per_mtok: None,
                output_per_mtok: None,
                cached_per_mtok: None,
                tools: false,
                vision: false,
                reasoning: false,
                known: false,
            }
        );
        assert_eq!(info.cost_micros(1000, 1000, 0), None);
    }

    #[test]
    fn longest_prefix_wins() {
        let catalog = builtin();
        assert_eq!(catalog.lookup(Family::OpenAi, "gpt-4o-mini").label, "GPT-4o mini");
        assert_eq!(catalog.lookup(Family::OpenAi, "gpt-4o-mini-2024-07-18").label, "GPT-4o mini");
        assert_eq!(catalog.lookup(Family::OpenAi, "gpt-4o-2024-08-06").label, "GPT-4o");
        assert_eq!(catalog.lookup(Family::OpenAi, "gpt-4.1-mini-2025-04-14").label, "GPT-4.1 mini");
        assert_eq!(catalog.lookup(Family::Anthropic, "claude-opus-4-1-20250805").label, "Claude Opus 4.1");
        assert_eq!(catalog.lookup(Family::Anthropic, "claude-opus-4-20250514").label, "Claude Opus 4");
        assert_eq!(
            catalog.lookup(Family::Gemini, "gemini-2.5-flash-lite-preview-06-17").label,
            "Gemini 2.5 Flash-Lite"
        );
        // Order in the file does not matter: the shorter id listed last still loses.
        let text = format!("{}{}", one("gpt-x-long", ""), one("gpt-x", ""));
        let catalog = Catalog::from_toml(&text).unwrap();
        assert_eq!(catalog.lookup(Family::OpenAi, "gpt-x-long-2025").label, "gpt-x-long");
        assert_eq!(catalog.lookup(Family::OpenAi, "gpt-x-2025").label, "gpt-x");
    }

    #[test]
    fn prefix_needs_a_boundary() {
        let catalog = builtin();
        assert!(!catalog.lookup(Family::OpenAi, "gpt-4.10").known);
        assert!(!catalog.lookup(Family::OpenAi, "gpt-4.1x").known);
        assert!(!catalog.lookup(Family::OpenAi, "gpt-4").known);
        assert!(!catalog.lookup(Family::OpenAi, "o").known);
        assert!(!catalog.lookup(Family::OpenAi, "").known);
        assert!(catalog.lookup(Family::OpenAi, "gpt-4.1-").known);
        // A non-ASCII character right after the prefix length must not panic.
        assert!(!catalog.lookup(Family::OpenAi, "gpt-4.é").known);
        assert!(!catalog.lookup(Family::OpenAi, "gpt-4.1é").known);
    }

    #[test]
    fn lookup_ignores_ascii_case() {
        let info = builtin().lookup(Family::OpenAi, "GPT-4o-Mini");
        assert!(info.known);
        assert_eq!(info.label, "GPT-4o mini");
        assert_eq!(info.id, "GPT-4o-Mini");
    }

    #[test]
    fn cost_plain() {
        // GPT-4.1: $2 in, $8 out per Mtok. 1M in + 1M out = $10 = 10,000,000 micros.
        let info = builtin().lookup(Family::OpenAi, "gpt-4.1");
        assert_eq!(info.cost_micros(1_000_000, 1_000_000, 0), Some(10_000_000));
        assert_eq!(info.cost_micros(0, 0, 0), Some(0));
        // 1,234 in * 2 + 567 out * 8 = 2,468 + 4,536 micros.
        assert_eq!(info.cost_micros(1_234, 567, 0), Some(7_004));
    }

    #[test]
    fn cost_with_cached_tokens() {
        // $3 in, $15 out, $0.30 cached: 10,000 in of which 8,000 cached, 500 out
        // = 2,000*3 + 8,000*0.3 + 500*15 = 6,000 + 2,400 + 7,500.
        let info = priced(Some(3.0), Some(15.0), Some(0.3));
        assert_eq!(info.cost_micros(10_000, 500, 8_000), Some(15_900));
        // Cached price unknown: cached tokens are charged at the input price.
        let info = priced(Some(3.0), Some(15.0), None);
        assert_eq!(info.cost_micros(10_000, 500, 8_000), Some(37_500));
        // More cached than input is capped at the input.
        let info = priced(Some(3.0), Some(15.0), Some(0.3));
        assert_eq!(info.cost_micros(100, 0, 1_000), Some(30));
    }

    #[test]
    fn cost_unknown_prices_give_none() {
        assert_eq!(priced(None, Some(1.0), None).cost_micros(10, 10, 0), None);
        assert_eq!(priced(Some(1.0), None, None).cost_micros(10, 10, 0), None);
        // Cached tokens with neither a cached nor an input price.
        assert_eq!(priced(None, Some(1.0), None).cost_micros(10, 0, 10), None);
        // Only the prices actually needed matter.
        assert_eq!(priced(Some(1.0), None, None).cost_micros(10, 0, 0), Some(10));
        assert_eq!(priced(None, Some(2.0), None).cost_micros(0, 10, 0), Some(20));
        assert_eq!(priced(None, Some(2.0), Some(0.5)).cost_micros(10, 0, 10), Some(5));
    }

    #[test]
    fn cost_rounds_to_nearest() {
        // 1 token at $2.50/Mtok = 2.5 micros -> 3 (half rounds up); at $2.49 -> 2.
        assert_eq!(priced(Some(2.5), Some(0.0), None).cost_micros(1, 0, 0), Some(3));
        assert_eq!(priced(Some(2.49), Some(0.0), None).cost_micros(1, 0, 0), Some(2));
        // 10 tokens at $0.15/Mtok = 1.5 micros exactly (no float drift) -> 2.
        assert_eq!(priced(Some(0.15), Some(0.0), None).cost_micros(10, 0, 0), Some(2));
        // 3 cached at $0.075 + 1 uncached at $0.15 = 0.375 micros -> 0.
        assert_eq!(priced(Some(0.15), Some(0.6), Some(0.075)).cost_micros(4, 0, 3), Some(0));
        // Rounding applies to the sum, not to each part: 0.4 + 0.4 = 0.8 -> 1.
        assert_eq!(priced(Some(0.4), Some(0.4), None).cost_micros(1, 1, 0), Some(1));
    }

    #[test]
    fn cost_does_not_overflow() {
        let info = priced(Some(1_000_000.0), Some(1_000_000.0), None);
        assert_eq!(info.cost_micros(u64::MAX, u64::MAX, 0), Some(i64::MAX));
    }

    #[test]
    fn unknown_field_names_the_entry() {
        let text = format!("{}{}", one("good", ""), one("bad-one", "colour = \"red\""));
        let (index, id, problem) = entry_error(&text);
        assert_eq!(index, 2);
        assert_eq!(id, "bad-one");
        assert!(problem.contains("colour"), "{problem}");
        let message = Catalog::from_toml(&text).unwrap_err().to_string();
        assert!(
            message.contains("#2") && message.contains("bad-one") && message.contains("colour"),
            "{message}"
        );
    }

    #[test]
    fn zero_context_window_is_refused() {
        let text = "[[model]]\nprovider = \"gemini\"\nid = \"g\"\ncontext_window = 0\nmax_output = 1\n";
        let (index, id, problem) = entry_error(text);
        assert_eq!((index, id.as_str()), (1, "g"));
        assert!(problem.contains("context_window"), "{problem}");
    }

    #[test]
    fn zero_or_oversized_max_output_is_refused() {
        let text = "[[model]]\nprovider = \"gemini\"\nid = \"g\"\ncontext_window = 10\nmax_output = 0\n";
        assert!(entry_error(text).2.contains("max_output"));
        let text = "[[model]]\nprovider = \"gemini\"\nid = \"g\"\ncontext_window = 10\nmax_output = 11\n";
        assert!(entry_error(text).2.contains("max_output"));
    }

    #[test]
    fn bad_prices_are_refused() {
        let (index, id, problem) = entry_error(&one("neg", "input_per_mtok = -1.0"));
        assert_eq!((index, id.as_str()), (1, "neg"));
        assert!(problem.contains("input_per_mtok"), "{problem}");
        assert!(entry_error(&one("n", "output_per_mtok = nan")).2.contains("output_per_mtok"));
        assert!(entry_error(&one("n", "cached_per_mtok = inf")).2.contains("cached_per_mtok"));
        // A zero price is allowed (free models).
        assert!(Catalog::from_toml(&one("free", "input_per_mtok = 0.0")).is_ok());
    }

    #[test]
    fn bad_ids_and_types_are_refused() {
        assert!(entry_error(&one("", "")).2.contains("id"));
        assert!(entry_error(&one("  ", "")).2.contains("id"));
        assert!(entry_error(&one("models/gemini-2.5-pro", "")).2.contains("models/"));
        let text = "[[model]]\nprovider = \"mistral\"\nid = \"m\"\ncontext_window = 1\nmax_output = 1\n";
        let (_, id, problem) = entry_error(text);
        assert_eq!(id, "m");
        assert!(problem.contains("mistral"), "{problem}");
        let text = "[[model]]\nprovider = \"openai\"\nid = \"m\"\ncontext_window = -5\nmax_output = 1\n";
        assert_eq!(entry_error(text).1, "m");
        let text = "[[model]]\nprovider = \"openai\"\nid = \"m\"\nmax_output = 1\n";
        assert!(entry_error(text).2.contains("context_window"));
        let text = "[[model]]\nprovider = \"openai\"\ncontext_window = 1\nmax_output = 1\n";
        let (index, id, problem) = entry_error(text);
        assert_eq!((index, id.as_str()), (1, ""));
        assert!(problem.contains("id"), "{problem}");
        assert!(entry_error(&one("m", "label = \"\"")).2.contains("label"));
    }

    #[test]
    fn type_errors_name_the_key() {
        let text = "[[model]]\nprovider = \"openai\"\nid = \"m\"\ncontext_window = -5\nmax_output = 1\n";
        assert!(entry_error(text).2.contains("`context_window` must be greater than 0"));
        let text =
            "[[model]]\nprovider = \"openai\"\nid = \"m\"\ncontext_window = 5000000000\nmax_output = 1\n";
        assert!(entry_error(text).2.contains("`context_window` is too large"));
        assert!(entry_error(&one("m", "tools = \"yes\"")).2.contains("`tools`"));
        assert!(entry_error(&one("m", "input_per_mtok = \"2\"")).2.contains("`input_per_mtok`"));
        assert!(entry_error(&one("m", "label = 3")).2.contains("`label`"));
        let text = "[[model]]\nprovider = \"openai\"\nid = 7\ncontext_window = 1\nmax_output = 1\n";
        assert!(entry_error(text).2.contains("`id` must be a string"));
        // Whole-number prices may be written without a decimal point.
        let catalog = Catalog::from_toml(&one("m", "input_per_mtok = 2\noutput_per_mtok = 8")).unwrap();
        assert_eq!(catalog.lookup(Family::OpenAi, "m").cost_micros(10, 10, 0), Some(100));
    }

    #[test]
    fn duplicates_are_refused_within_a_family_only() {
        let text = format!("{}{}", one("dup", ""), one("dup", ""));
        let (index, id, problem) = entry_error(&text);
        assert_eq!((index, id.as_str()), (2, "dup"));
        assert!(problem.contains("#1"), "{problem}");
        assert_eq!(entry_error(&format!("{}{}", one("dup", ""), one("DUP", ""))).0, 2);
        let other = "[[model]]\nprovider = \"gemini\"\nid = \"dup\"\ncontext_window = 9\nmax_output = 9\n";
        assert!(Catalog::from_toml(&format!("{}{other}", one("dup", ""))).is_ok());
    }

    #[test]
    fn layout_errors() {
        assert!(matches!(Catalog::from_toml("[[model]\n"), Err(CatalogError::Syntax(_))));
        assert!(matches!(Catalog::from_toml("version = 1\n"), Err(CatalogError::Layout(_))));
        assert!(matches!(Catalog::from_toml("model = 3\n"), Err(CatalogError::Layout(_))));
        assert!(matches!(Catalog::from_toml("model = [1]\n"), Err(CatalogError::Entry { index: 1, .. })));
        let empty = Catalog::from_toml("# nothing here\n").unwrap();
        assert!(empty.entries(Family::OpenAi).is_empty());
        let message = Catalog::from_toml("\n\n[[model]\n").unwrap_err().to_string();
        assert!(message.contains("line 3"), "{message}");
    }

    #[test]
    fn optional_keys_take_defaults() {
        let catalog = Catalog::from_toml(&one("bare", "")).unwrap();
        let info = catalog.lookup(Family::OpenAi, "bare");
        assert!(info.known);
        assert_eq!(info.label, "bare");
        assert_eq!((info.input_per_mtok, info.output_per_mtok, info.cached_per_mtok), (None, None, None));
        assert!(!info.tools && !info.vision && !info.reasoning);
        assert_eq!(info.cost_micros(1, 1, 0), None);
    }

    #[test]
    fn merged_with_replaces_and_adds() {
        let base = builtin();
        let before = base.entries(Family::OpenAi);
        let overrides = Catalog::from_toml(concat!(
            "[[model]]\nprovider = \"openai\"\nid = \"gpt-4o\"\nlabel = \"GPT-4o (discounted)\"\n",
            "context_window = 128000\nmax_output = 16384\ninput_per_mtok = 1.0\noutput_per_mtok = 4.0\n",
            "[[model]]\nprovider = \"openai\"\nid = \"my-finetune\"\ncontext_window = 32000\n",
            "max_output = 4000\ntools = true\n",
            "[[model]]\nprovider = \"anthropic\"\nid = \"gpt-4o\"\ncontext_window = 10\nmax_output = 10\n",
        ))
        .unwrap();
        let merged = base.merged_with(overrides);

        let after = merged.entries(Family::OpenAi);
        assert_eq!(after.len(), before.len() + 1);
        // Replaced in place: same position, new figures, and no stale cached price.
        let pos = before.iter().position(|m| m.id == "gpt-4o").unwrap();
        assert_eq!(after[pos].label, "GPT-4o (discounted)");
        assert_eq!(after[pos].input_per_mtok, Some(1.0));
        assert_eq!(after[pos].cached_per_mtok, None);
        // Added at the end.
        assert_eq!(after.last().map(|m| m.id.as_str()), Some("my-finetune"));
        let info = merged.lookup(Family::OpenAi, "my-finetune");
        assert!(info.known && info.tools);
        // Dated ids follow the override too; other entries are untouched.
        assert_eq!(merged.lookup(Family::OpenAi, "gpt-4o-2024-08-06").label, "GPT-4o (discounted)");
        assert_eq!(merged.lookup(Family::OpenAi, "gpt-4o-mini").label, "GPT-4o mini");
        // Ids compare ignoring ASCII case.
        let upper = Catalog::from_toml(&one("MY-FINETUNE", "label = \"Upper\"")).unwrap();
        let merged = merged.merged_with(upper);
        assert_eq!(merged.entries(Family::OpenAi).len(), before.len() + 1);
        assert_eq!(merged.lookup(Family::OpenAi, "my-finetune").label, "Upper");
        // Same id in another family is a separate entry.
        assert_eq!(merged.lookup(Family::Anthropic, "gpt-4o").context_window, 10);
        assert_eq!(merged.entries(Family::Anthropic).len(), builtin().entries(Family::Anthropic).len() + 1);
    }

    #[test]
    fn family_serde_names() {
        assert_eq!(serde_json::to_string(&Family::OpenAi).unwrap(), "\"openai\"");
        assert_eq!(serde_json::to_string(&Family::Anthropic).unwrap(), "\"anthropic\"");
        assert_eq!(serde_json::to_string(&Family::Gemini).unwrap(), "\"gemini\"");
        let back: Family = serde_json::from_str("\"openai\"").unwrap();
        assert_eq!(back, Family::OpenAi);
        assert!(serde_json::from_str::<Family>("\"open_ai\"").is_err());
        for family in [Family::OpenAi, Family::Anthropic, Family::Gemini] {
            assert_eq!(serde_json::to_string(&family).unwrap(), format!("\"{}\"", family.as_str()));
        }
    }

    #[test]
    fn model_info_serializes() {
        let json = serde_json::to_value(builtin().lookup(Family::Gemini, "gemini-2.5-flash")).unwrap();
        assert_eq!(json["id"], "gemini-2.5-flash");
        assert_eq!(json["known"], true);
        assert_eq!(json["reasoning"], true);
    }
}
