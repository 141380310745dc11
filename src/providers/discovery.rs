//! What a provider's own API says a model can do, wherever it says it: vLLM and SGLang
//! (`/v1/models`: `max_model_len`), OpenRouter (`/models`: `context_length`,
//! `supported_parameters`, `architecture.input_modalities`, `top_provider.max_completion_tokens`,
//! prices), LM Studio (`max_context_length`, `type: "vlm"`; its native
//! `/api/v0/models/{model}`: `capabilities: ["tool_use"]`), Ollama (`/api/show`:
//! `capabilities`, `model_info.<arch>.context_length`), llama.cpp's server (`/props`: `n_ctx`,
//! `modalities.vision`) and Gemini (`models.list`: `inputTokenLimit`, `outputTokenLimit`,
//! `thinking`). Pure parsing; every field is optional.

use serde_json::Value;

/// Facts about one model, each `None` where the provider did not say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Discovered {
    /// Tokens the model reads at most.
    pub context_window: Option<u32>,
    /// Tokens it writes at most.
    pub max_output: Option<u32>,
    /// Whether it takes tool definitions.
    pub tools: Option<bool>,
    /// Whether it reads images.
    pub vision: Option<bool>,
    /// Whether it reasons (thinking).
    pub reasoning: Option<bool>,
    /// USD per million input and output tokens.
    pub prices: Option<(f64, f64)>,
}

impl Discovered {
    /// Whether the provider said anything at all.
    pub fn is_empty(&self) -> bool {
        *self == Discovered::default()
    }

    /// Whether the window, tools and vision are all known (nothing more worth asking for).
    pub fn is_complete(&self) -> bool {
        self.context_window.is_some() && self.tools.is_some() && self.vision.is_some()
    }

    /// Fills what `self` does not know from `other`.
    pub fn or(self, other: Discovered) -> Discovered {
        Discovered {
            context_window: self.context_window.or(other.context_window),
            max_output: self.max_output.or(other.max_output),
            tools: self.tools.or(other.tools),
            vision: self.vision.or(other.vision),
            reasoning: self.reasoning.or(other.reasoning),
            prices: self.prices.or(other.prices),
        }
    }
}

fn tokens(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_u64).filter(|n| *n > 0).map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

fn strings(v: Option<&Value>) -> Option<Vec<&str>> {
    v.and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect())
}

/// A price string or number per token, as USD per million tokens.
fn per_million(v: Option<&Value>) -> Option<f64> {
    let per_token = match v? {
        Value::String(s) => s.parse::<f64>().ok()?,
        Value::Number(n) => n.as_f64()?,
        _ => return None,
    };
    (per_token.is_finite() && per_token >= 0.0).then_some(per_token * 1_000_000.0)
}

/// One entry of an OpenAI-compatible model list (vLLM, SGLang, OpenRouter, LM Studio).
fn openai_entry(item: &Value) -> Discovered {
    let params = strings(item.get("supported_parameters"));
    let inputs = strings(item.pointer("/architecture/input_modalities"));
    let prices =
        per_million(item.pointer("/pricing/prompt")).zip(per_million(item.pointer("/pricing/completion")));
    Discovered {
        context_window: tokens(item.get("max_model_len"))
            .or_else(|| tokens(item.get("context_length")))
            .or_else(|| tokens(item.get("max_context_length"))),
        max_output: tokens(item.pointer("/top_provider/max_completion_tokens")),
        tools: params.as_ref().map(|p| p.contains(&"tools")),
        vision: inputs.map(|i| i.contains(&"image")).or_else(|| {
            match item.get("type").and_then(Value::as_str) {
                Some("vlm") => Some(true),
                Some("llm") => Some(false),
                _ => None,
            }
        }),
        reasoning: params.map(|p| p.contains(&"reasoning") || p.contains(&"include_reasoning")),
        prices,
    }
}

/// What an OpenAI-compatible `GET /models` says about `model` (matched by `id`).
pub fn from_openai_models(body: &[u8], model: &str) -> Discovered {
    let Ok(v) = serde_json::from_slice::<Value>(body) else { return Discovered::default() };
    v.get("data")
        .and_then(Value::as_array)
        .and_then(|items| items.iter().find(|i| i.get("id").and_then(Value::as_str) == Some(model)))
        .map(openai_entry)
        .unwrap_or_default()
}

/// What Ollama's `POST /api/show` says: `capabilities` and the architecture's context length.
pub fn from_ollama_show(body: &[u8]) -> Discovered {
    let Ok(v) = serde_json::from_slice::<Value>(body) else { return Discovered::default() };
    let capabilities = strings(v.get("capabilities"));
    let context_window = v.get("model_info").and_then(Value::as_object).and_then(|info| {
        info.iter().find(|(k, _)| k.ends_with(".context_length")).and_then(|(_, n)| tokens(Some(n)))
    });
    Discovered {
        context_window,
        max_output: None,
        tools: capabilities.as_ref().map(|c| c.contains(&"tools")),
        vision: capabilities.as_ref().map(|c| c.contains(&"vision")),
        reasoning: capabilities.map(|c| c.contains(&"thinking")),
        prices: None,
    }
}

/// What llama.cpp's server says at `GET /props`: the context it runs with
/// (`default_generation_settings.n_ctx`, or `n_ctx` at the top in newer builds) and whether a
/// vision projector is loaded (`modalities.vision`).
pub fn from_llamacpp_props(body: &[u8]) -> Discovered {
    let Ok(v) = serde_json::from_slice::<Value>(body) else { return Discovered::default() };
    Discovered {
        context_window: tokens(v.pointer("/default_generation_settings/n_ctx"))
            .or_else(|| tokens(v.get("n_ctx"))),
        vision: v.pointer("/modalities/vision").and_then(Value::as_bool),
        ..Discovered::default()
    }
}

/// What LM Studio's native `GET /api/v0/models/{model}` says: the context it is loaded with
/// (else the most it can take), `type` (`vlm` reads images) and `capabilities` (`tool_use`).
pub fn from_lmstudio_model(body: &[u8]) -> Discovered {
    let Ok(v) = serde_json::from_slice::<Value>(body) else { return Discovered::default() };
    // Only an answer of LM Studio's own shape (another server's 200 says nothing here).
    if v.get("id").and_then(Value::as_str).is_none() || v.get("type").and_then(Value::as_str).is_none() {
        return Discovered::default();
    }
    Discovered {
        context_window: tokens(v.get("loaded_context_length"))
            .or_else(|| tokens(v.get("max_context_length"))),
        tools: strings(v.get("capabilities")).map(|c| c.contains(&"tool_use")),
        vision: match v.get("type").and_then(Value::as_str) {
            Some("vlm") => Some(true),
            Some("llm") => Some(false),
            _ => None,
        },
        ..Discovered::default()
    }
}

/// What Gemini's `models.list` says about `model` (`name` is `models/{model}`).
pub fn from_gemini_models(body: &[u8], model: &str) -> Discovered {
    let Ok(v) = serde_json::from_slice::<Value>(body) else { return Discovered::default() };
    let wanted = format!("models/{}", model.strip_prefix("models/").unwrap_or(model));
    let Some(item) = v
        .get("models")
        .and_then(Value::as_array)
        .and_then(|items| items.iter().find(|i| i.get("name").and_then(Value::as_str) == Some(&wanted)))
    else {
        return Discovered::default();
    };
    Discovered {
        context_window: tokens(item.get("inputTokenLimit")),
        max_output: tokens(item.get("outputTokenLimit")),
        tools: None,
        vision: None,
        reasoning: item.get("thinking").and_then(Value::as_bool),
        prices: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_providers_list_is_read_where_it_says_something() {
        let vllm = json!({ "object": "list", "data": [{ "id": "my-local-llama", "object": "model", "owned_by": "vllm",
            "root": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 32768 }] });
        let d = from_openai_models(vllm.to_string().as_bytes(), "my-local-llama");
        assert_eq!(d.context_window, Some(32768));
        assert_eq!((d.tools, d.vision), (None, None));

        let openrouter = json!({ "data": [{ "id": "meta-llama/llama-3.3-70b-instruct", "context_length": 131072,
            "architecture": { "input_modalities": ["text", "image"], "output_modalities": ["text"] },
            "top_provider": { "max_completion_tokens": 16384 },
            "supported_parameters": ["tools", "tool_choice", "max_tokens", "reasoning"],
            "pricing": { "prompt": "0.00000012", "completion": "0.0000003" } }] });
        let d = from_openai_models(openrouter.to_string().as_bytes(), "meta-llama/llama-3.3-70b-instruct");
        assert_eq!((d.context_window, d.max_output), (Some(131072), Some(16384)));
        assert_eq!((d.tools, d.vision, d.reasoning), (Some(true), Some(true), Some(true)));
        let (input, output) = d.prices.unwrap();
        assert!((input - 0.12).abs() < 1e-9 && (output - 0.3).abs() < 1e-9);

        let lmstudio = json!({ "object": "list", "data": [{ "id": "qwen2-vl-7b-instruct", "object": "model", "type": "vlm",
            "max_context_length": 32768 }] });
        let d = from_openai_models(lmstudio.to_string().as_bytes(), "qwen2-vl-7b-instruct");
        assert_eq!((d.context_window, d.vision), (Some(32768), Some(true)));

        let show = json!({ "details": { "family": "gemma3" }, "capabilities": ["completion", "vision"],
            "model_info": { "general.architecture": "gemma3", "gemma3.context_length": 131072 } });
        let d = from_ollama_show(show.to_string().as_bytes());
        assert_eq!(
            (d.context_window, d.tools, d.vision, d.reasoning),
            (Some(131072), Some(false), Some(true), Some(false))
        );

        let gemini = json!({ "models": [{ "name": "models/gemini-3-flash", "inputTokenLimit": 1048576,
            "outputTokenLimit": 65536, "thinking": true }] });
        let d = from_gemini_models(gemini.to_string().as_bytes(), "gemini-3-flash");
        assert_eq!((d.context_window, d.max_output, d.reasoning), (Some(1048576), Some(65536), Some(true)));

        // llama.cpp's server, older and newer `/props`.
        let props = json!({ "default_generation_settings": { "n_ctx": 16384, "n_predict": -1 },
            "total_slots": 1, "chat_template": "…", "modalities": { "vision": true, "audio": false } });
        let d = from_llamacpp_props(props.to_string().as_bytes());
        assert_eq!((d.context_window, d.vision, d.tools), (Some(16384), Some(true), None));
        let d = from_llamacpp_props(json!({ "n_ctx": 8192 }).to_string().as_bytes());
        assert_eq!((d.context_window, d.vision), (Some(8192), None));

        // LM Studio's native model entry.
        let lm = json!({ "id": "qwen2.5-7b-instruct", "object": "model", "type": "llm", "publisher": "lmstudio-community",
            "arch": "qwen2", "state": "loaded", "max_context_length": 32768, "loaded_context_length": 4096,
            "capabilities": ["tool_use"] });
        let d = from_lmstudio_model(lm.to_string().as_bytes());
        assert_eq!((d.context_window, d.tools, d.vision), (Some(4096), Some(true), Some(false)));
        assert!(d.is_complete());
        assert!(from_lmstudio_model(json!({ "error": "model not found" }).to_string().as_bytes()).is_empty());

        for junk in [&b"not json"[..], b"{}", b"{\"data\": 5}", b"[]"] {
            assert!(from_openai_models(junk, "m").is_empty());
            assert!(from_ollama_show(junk).is_empty());
            assert!(from_gemini_models(junk, "m").is_empty());
            assert!(from_llamacpp_props(junk).is_empty());
            assert!(from_lmstudio_model(junk).is_empty());
        }
    }
}
