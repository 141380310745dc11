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
    for id in ["gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4o", "gpt-4o-mini", "o3", "o4-mini", "gpt-5"] {
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
    assert_eq!(catalog.lookup(Family::Gemini, "gemini-2.5-flash-preview-05-20").label, "Gemini 2.5 Flash");
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
            tools: true,
            vision: false,
            reasoning: false,
            image_output: false,
            image_input_per_mtok: None,
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
    assert!(message.contains("#2") && message.contains("bad-one") && message.contains("colour"), "{message}");
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
    let text = "[[model]]\nprovider = \"openai\"\nid = \"m\"\ncontext_window = 5000000000\nmax_output = 1\n";
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

#[test]
fn image_models_are_marked_and_priced_per_kind_of_token() {
    let gpt = builtin().lookup(Family::OpenAi, "gpt-image-1");
    assert!(gpt.known && gpt.image_output && !gpt.tools);
    // 1,000 text tokens at $5, 2,000 image tokens at $10, 4,160 output tokens at $40 per million.
    assert_eq!(gpt.image_cost_micros(1000, 2000, 4160), Some(5_000 + 20_000 + 166_400));
    let gemini = builtin().lookup(Family::Gemini, "gemini-2.5-flash-image-preview");
    assert!(gemini.image_output, "the image model wins over gemini-2.5-flash: {gemini:?}");
    // Without an image input price, input images cost the input price.
    assert_eq!(gemini.image_cost_micros(100, 1000, 1290), Some(30 + 300 + 38_700));
    assert!(!builtin().lookup(Family::Gemini, "gemini-2.5-flash").image_output);
    let (_, _, problem) = entry_error(&one("m", "image_output = \"yes\""));
    assert!(problem.contains("image_output"), "{problem}");
}
