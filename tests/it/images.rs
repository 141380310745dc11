//! Image generation end to end against the mock upstream (answers built from OpenAI's and
//! Gemini's public references): the agent's `generate_image` tool (a new image, then an edit of
//! it), an image model picked in the composer (OpenAI and Gemini, with an attached image as the
//! edit's input), the storage quota, the recorded cost, and upstream failures shown as such.

use arbor::config::Config;
use arbor::domain::sessions::tree::{MessageStatus, Role};
use base64::Engine as _;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::agent::{agent, calls, says};
use crate::runs::{Chat, chat_with};
use crate::support::mock_upstream::{Provider, RecordedRequest, Reply};

const CHAT: &str = "openai/gpt-4o-mini";
const GPT_IMAGE: &str = "openai/gpt-image-1";
const GEMINI_IMAGE: &str = "gemini/gemini-2.5-flash-image";

/// The mock's providers also offer an image model each; the tool uses OpenAI's.
fn with_image_models(c: &mut Config) {
    if let Some(p) = c.llm.providers.get_mut("openai") {
        p.models.push("gpt-image-1".into());
    }
    if let Some(p) = c.llm.providers.get_mut("gemini") {
        p.models.push("gemini-2.5-flash-image".into());
    }
    c.llm.image_model = GPT_IMAGE.into();
}

/// The PNG an images fixture holds.
fn fixture_png(path: &str, pointer: &str) -> Vec<u8> {
    let dir = crate::support::mock_upstream::fixtures_dir();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(dir.join(path)).unwrap()).unwrap();
    base64::engine::general_purpose::STANDARD.decode(v.pointer(pointer).unwrap().as_str().unwrap()).unwrap()
}

fn openai_png() -> Vec<u8> {
    fixture_png("openai/images.json", "/data/0/b64_json")
}

fn has_bytes(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

async fn attachments(c: &Chat, message: Uuid) -> Vec<arbor::model::files::Attachment> {
    arbor::storage::repos::files::attachments_of(&c.app.state.db, &[message]).await.unwrap()
}

async fn usage_of(c: &Chat, model: &str) -> Vec<arbor::storage::entities::usage::Model> {
    use arbor::storage::entities::usage;
    usage::Entity::find().filter(usage::Column::Model.eq(model)).all(&c.app.state.db).await.unwrap()
}

async fn stored_bytes(c: &Chat) -> i64 {
    arbor::storage::repos::files::user_bytes(&c.app.state.db, c.user.id).await.unwrap()
}

fn image_requests(c: &Chat, provider: Provider) -> Vec<RecordedRequest> {
    c.mock
        .requests_for(provider)
        .into_iter()
        .filter(|r| r.path_only().contains("/images/") || r.path_only().ends_with(":generateContent"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_makes_an_image_then_edits_it_and_both_show_in_the_thread() {
    let a = agent("auto-edit", with_image_models).await;
    let c = &a.c;
    c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("call_i1", "generate_image", json!({"prompt": "A lighthouse"}))]),
    );
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/images.json"));
    c.mock.enqueue(Provider::OpenAi, says("Here is your lighthouse."));
    c.send_ok("Draw a lighthouse", CHAT).await;
    assert_eq!(a.ended().await, "completed");

    // Offered, because an image model is there; the call went to the generations endpoint.
    let first = c.mock.requests_for(Provider::OpenAi)[0].json().unwrap();
    let offered: Vec<&str> =
        first["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert!(offered.contains(&"generate_image"), "{offered:?}");
    let made = image_requests(c, Provider::OpenAi);
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].path_only(), "/openai/v1/images/generations");
    assert_eq!(made[0].header("authorization"), Some("Bearer sk-test-openai-SECRETKEY"));
    assert_eq!(made[0].json().unwrap(), json!({"model": "gpt-image-1", "prompt": "A lighthouse", "n": 1}));

    // The image is attached to the tool's result, counted in the member's storage.
    let path = a.path().await;
    let roles: Vec<Role> = path.iter().map(|m| m.role).collect();
    assert_eq!(roles, vec![Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
    let files = attachments(c, path[2].id).await;
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!((files[0].mime.as_str(), files[0].user_id), ("image/png", c.user.id));
    assert!(stored_bytes(c).await >= files[0].size);
    let served = c.app.get(&format!("/blobs/{}", files[0].hash), Some(&c.s.cookie)).await;
    assert_eq!(served.headers()["content-type"], "image/png");
    assert_eq!(served.bytes().await.unwrap().to_vec(), openai_png());
    // The model was told the image's name.
    let told = a.tool_results_sent(2);
    assert!(told[0]["content"].as_str().unwrap().contains(&files[0].file_name), "{told:?}");
    // Its cost: 10 text tokens at $5, 40 image tokens at $10, 1,056 output tokens at $40 per million.
    let usage = usage_of(c, "gpt-image-1").await;
    assert_eq!(usage.len(), 1);
    assert_eq!((usage[0].tokens_in, usage[0].tokens_out), (50, 1056));
    assert_eq!(usage[0].cost_micros, Some(50 + 400 + 42_240));
    assert_eq!(usage[0].message_id, Some(path[2].id));
    // The page shows it as a picture that opens in the lightbox.
    let page = c.app.get(&format!("/s/{}", c.session), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains(&format!("href=\"/blobs/{}\" data-lightbox", files[0].hash)), "{page}");

    // Next, the agent edits the image it made: the edit endpoint gets it as a file part.
    c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("call_i2", "generate_image", json!({"prompt": "Now at night", "images": ["last"]}))]),
    );
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/images.json"));
    c.mock.enqueue(Provider::OpenAi, says("Now at night."));
    c.send_ok("Make it night", CHAT).await;
    assert_eq!(a.ended().await, "completed");
    let edit = image_requests(c, Provider::OpenAi).pop().unwrap();
    assert_eq!(edit.path_only(), "/openai/v1/images/edits");
    let content_type = edit.header("content-type").unwrap();
    assert!(content_type.starts_with("multipart/form-data; boundary="), "{content_type}");
    let body = edit.body_text();
    assert!(body.contains("name=\"prompt\"\r\n\r\nNow at night\r\n"), "{body:.300}");
    assert!(body.contains(&format!("name=\"image[]\"; filename=\"{}\"", files[0].file_name)), "{body:.600}");
    assert!(has_bytes(&edit.body, &openai_png()), "the thread's image is sent");
    assert_eq!(usage_of(c, "gpt-image-1").await.len(), 2);
    assert!(c.mock.problems().is_empty(), "{:?}", c.mock.problems());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_is_offered_only_with_an_image_model_and_refuses_unknown_images() {
    // No image model: not offered.
    let plain = agent("auto-edit", |_| {}).await;
    plain.c.mock.enqueue(Provider::OpenAi, says("Hello."));
    plain.c.send_ok("Hi", CHAT).await;
    assert_eq!(plain.ended().await, "completed");
    let first = plain.c.mock.requests_for(Provider::OpenAi)[0].json().unwrap();
    assert!(!first.to_string().contains("generate_image"), "{first}");

    // With one, an image the thread does not hold is refused before anything is sent.
    let a = agent("auto-edit", with_image_models).await;
    let c = &a.c;
    let unknown = json!({"prompt": "Edit it", "images": ["holiday.png"]});
    let not_a_list = json!({"prompt": "Edit it", "images": "last"});
    let no_prompt = json!({"images": ["last"]});
    c.mock.enqueue(
        Provider::OpenAi,
        calls(&[
            ("call_x", "generate_image", unknown),
            ("call_y", "generate_image", not_a_list),
            ("call_z", "generate_image", no_prompt),
        ]),
    );
    c.mock.enqueue(Provider::OpenAi, says("There is no such image."));
    c.send_ok("Edit my holiday photo", CHAT).await;
    assert_eq!(a.ended().await, "completed");
    let told: Vec<String> =
        a.tool_results_sent(1).iter().map(|r| r["content"].as_str().unwrap().to_string()).collect();
    assert!(told[0].contains("no images yet"), "{told:?}");
    assert!(told[1].contains("\"images\" is a list"), "{told:?}");
    assert!(told[2].contains("needs \"prompt\""), "{told:?}");
    assert!(image_requests(c, Provider::OpenAi).is_empty());
    assert!(a.calls().await.iter().all(|c| c.status == "failed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_image_model_in_the_composer_answers_with_the_image_and_edits_an_attached_one() {
    let c = chat_with(with_image_models).await;
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/images.json"));
    let answer = c.send_ok("A lighthouse at dusk", GPT_IMAGE).await;
    let m = c.settled(answer).await;
    assert_eq!(m.status, MessageStatus::Complete, "{m:?}");
    assert_eq!(m.model.as_deref(), Some(GPT_IMAGE));
    let files = attachments(&c, answer).await;
    assert_eq!(files.len(), 1);
    let usage = m.usage.unwrap();
    assert_eq!((usage.input, usage.output, usage.cost_micros), (50, 1056, Some(42_690)));
    let sent = image_requests(&c, Provider::OpenAi);
    assert_eq!(sent.len(), 1, "one image call, no chat stream");
    assert_eq!(sent[0].json().unwrap()["prompt"], "A lighthouse at dusk");
    let page = c.app.get(&format!("/s/{}", c.session), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains(&format!("href=\"/blobs/{}\" data-lightbox", files[0].hash)), "{page}");

    // An attached image goes to the edits endpoint.
    let upload = crate::files::upload(&c, &c.s, "cat.png", crate::files::png()).await;
    let (upload_id, _) = crate::files::chip_ids(&upload.text().await.unwrap());
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/images.json"));
    let body = format!(
        "{}&attachments={upload_id}",
        crate::runs::form("Give the cat a hat", &Uuid::new_v4().simple().to_string(), GPT_IMAGE)
    );
    let res = c.app.post_form(&format!("/s/{}/messages", c.session), &body, Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    let answer = crate::runs::streaming_id(&res.text().await.unwrap());
    assert_eq!(c.settled(answer).await.status, MessageStatus::Complete);
    let edit = image_requests(&c, Provider::OpenAi).pop().unwrap();
    assert_eq!(edit.path_only(), "/openai/v1/images/edits");
    assert!(edit.body_text().contains("name=\"image[]\"; filename=\"cat.png\""));
    assert!(has_bytes(&edit.body, &crate::files::png()));
    assert_eq!(attachments(&c, answer).await.len(), 1);

    // A chat model asked next is told of the images made, by name.
    c.mock.enqueue(Provider::OpenAi, crate::agent::says("A lighthouse, then a cat in a hat."));
    let next = c.send_ok("What did you draw?", CHAT).await;
    assert_eq!(c.settled(next).await.status, MessageStatus::Complete);
    let chat = c.mock.requests_for(Provider::OpenAi).pop().unwrap().json().unwrap();
    let assistant: Vec<String> = chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| m["content"].to_string())
        .collect();
    assert_eq!(assistant.len(), 2, "{chat}");
    assert!(
        assistant[0].contains(&format!("[Images made for the user: {}]", files[0].file_name)),
        "{assistant:?}"
    );
    assert!(c.mock.problems().is_empty(), "{:?}", c.mock.problems());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_image_model_in_the_composer_answers_with_its_text_and_image() {
    let c = chat_with(with_image_models).await;
    c.mock.enqueue(Provider::Gemini, Reply::fixture("gemini/image.json"));
    let answer = c.send_ok("A lighthouse at dusk", GEMINI_IMAGE).await;
    let m = c.settled(answer).await;
    assert_eq!(m.status, MessageStatus::Complete, "{m:?}");
    assert_eq!(m.text(), "Here is a lighthouse at dusk.");
    let files = attachments(&c, answer).await;
    assert_eq!(files.len(), 1);
    let served = c.app.get(&format!("/blobs/{}", files[0].hash), Some(&c.s.cookie)).await;
    assert_eq!(
        served.bytes().await.unwrap().to_vec(),
        fixture_png("gemini/image.json", "/candidates/0/content/parts/1/inlineData/data")
    );
    let sent = image_requests(&c, Provider::Gemini);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path_only(), "/gemini/v1beta/models/gemini-2.5-flash-image:generateContent");
    assert_eq!(sent[0].header("x-goog-api-key"), Some("sk-test-gemini-SECRETKEY"));
    let body = sent[0].json().unwrap();
    assert_eq!(body["generationConfig"]["responseModalities"], json!(["TEXT", "IMAGE"]));
    assert_eq!(body["contents"][0]["parts"][0]["text"], "A lighthouse at dusk");
    // 12 input tokens at $0.30 and 1,298 output tokens at $30 per million.
    let usage = m.usage.unwrap();
    assert_eq!((usage.input, usage.output, usage.cost_micros), (12, 1298, Some(4 + 38_940)));
    assert_eq!(usage_of(&c, "gemini-2.5-flash-image").await[0].cost_micros, Some(38_944));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_storage_quota_nothing_is_half_written() {
    let c = chat_with(|cfg| {
        with_image_models(cfg);
        cfg.files.user_quota_mb = 1;
    })
    .await;
    // Files fill all but 200 bytes of the quota: the image made (463 bytes) does not fit.
    let filler = vec![b'x'; 1024 * 1024 - 200];
    assert_eq!(crate::files::upload(&c, &c.s, "filler.txt", filler).await.status(), 200);
    let before = stored_bytes(&c).await;
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/images.json"));
    let answer = c.send_ok("A lighthouse", GPT_IMAGE).await;
    let m = c.settled(answer).await;
    assert_eq!(m.status, MessageStatus::Error);
    assert!(m.error.as_deref().unwrap().contains("storage limit"), "{:?}", m.error);
    assert!(attachments(&c, answer).await.is_empty());
    assert_eq!(stored_bytes(&c).await, before);
    // The provider was paid: the call is recorded with its cost.
    assert_eq!(usage_of(&c, "gpt-image-1").await[0].cost_micros, Some(42_690));

    // Once the files fill it, no image is even asked for.
    let more = vec![b'y'; 200];
    assert_eq!(crate::files::upload(&c, &c.s, "more.txt", more).await.status(), 200);
    let answer = c.send_ok("Another lighthouse", GPT_IMAGE).await;
    let m = c.settled(answer).await;
    assert_eq!(m.status, MessageStatus::Error);
    assert!(m.error.as_deref().unwrap().contains("storage limit"), "{:?}", m.error);
    assert_eq!(image_requests(&c, Provider::OpenAi).len(), 1, "nothing asked for the second time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_failures_and_bad_images_are_shown_and_nothing_is_kept() {
    let c = chat_with(with_image_models).await;
    let refusal = json!({"error": {"message": "Your request was rejected by the safety system.", "type": "image_generation_user_error", "param": null, "code": "moderation_blocked"}});
    c.mock.enqueue(Provider::OpenAi, Reply::json(400, refusal.to_string()));
    let answer = c.send_ok("Something forbidden", GPT_IMAGE).await;
    let m = c.settled(answer).await;
    assert_eq!(m.status, MessageStatus::Error);
    assert!(m.error.as_deref().unwrap().contains("rejected by the safety system"), "{:?}", m.error);
    let page = c.app.get(&format!("/s/{}", c.session), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("rejected by the safety system"), "the person sees why");

    // An answer whose "image" is not one is refused, not stored.
    let html = base64::engine::general_purpose::STANDARD.encode("<html><script>alert(1)</script></html>");
    c.mock.enqueue(Provider::OpenAi, Reply::json(200, json!({"data": [{"b64_json": html}]}).to_string()));
    let answer = c.send_ok("A lighthouse", GPT_IMAGE).await;
    let m = c.settled(answer).await;
    assert_eq!(m.status, MessageStatus::Error);
    assert!(m.error.as_deref().unwrap().contains("not a PNG, JPEG, GIF or WebP"), "{:?}", m.error);
    assert!(attachments(&c, answer).await.is_empty());
    assert_eq!(stored_bytes(&c).await, 0);

    // Gemini answering with words only is an error that quotes them.
    let words = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "I cannot draw that."}]}, "finishReason": "STOP"}]});
    c.mock.enqueue(Provider::Gemini, Reply::json(200, words.to_string()));
    let answer = c.send_ok("A lighthouse", GEMINI_IMAGE).await;
    let m = c.settled(answer).await;
    assert!(m.error.as_deref().unwrap().contains("I cannot draw that."), "{:?}", m.error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_image_model_is_offered_and_its_facts_say_it_makes_images() {
    let c = chat_with(|cfg| {
        if let Some(p) = cfg.llm.providers.get_mut("openai") {
            p.models.clear();
        }
    })
    .await;
    let listed = json!({"object": "list", "data": [
        {"id": "gpt-4o-mini", "object": "model", "created": 1721172741, "owned_by": "system"},
        {"id": "gpt-image-1", "object": "model", "created": 1745517030, "owned_by": "system"},
        {"id": "dall-e-2", "object": "model", "created": 1698798177, "owned_by": "system"},
        {"id": "text-embedding-3-small", "object": "model", "created": 1705948997, "owned_by": "system"}
    ]});
    c.mock.respond_with(Provider::OpenAi, move |r| {
        assert_eq!(r.path_only(), "/openai/v1/models", "only the list is asked for");
        Reply::json(200, listed.to_string())
    });
    let actor = arbor::domain::accounts::Actor::for_tests(&c.user);
    let providers = c.app.state.engine.providers();
    let offered: Vec<String> = providers
        .choices(&actor)
        .await
        .into_iter()
        .map(|m| m.value)
        .filter(|v| v.starts_with("openai/"))
        .collect();
    assert_eq!(offered, vec!["openai/gpt-4o-mini", "openai/gpt-image-1"]);
    assert_eq!(providers.image_model(&actor).await.as_deref(), Some(GPT_IMAGE));
    let fact = |reference: &str| {
        providers.facts(reference).into_iter().find(|f| f.name == "image output").map(|f| f.value)
    };
    assert_eq!(fact(GPT_IMAGE).as_deref(), Some("yes"));
    assert_eq!(fact(CHAT).as_deref(), Some("no"));
}
