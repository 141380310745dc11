//! The `generate_image` tool: an image model (see `llm.image_model`) makes an image from a
//! prompt, or from images already in the conversation; it is shown in the thread.

use serde_json::json;

use super::{OfferedTool, tool_digest};
use crate::providers::types::ToolSpec;
use crate::tools::Risk;

/// The tool's name.
pub const GENERATE_IMAGE: &str = "generate_image";

/// The `generate_image` tool.
pub fn generate_image_spec() -> ToolSpec {
    ToolSpec {
        name: GENERATE_IMAGE.into(),
        description: "Make an image with an image model and show it to the user in the conversation. \
Describe the image in `prompt`. To change or combine images already in the conversation (the user's \
or ones made before), name them in `images`: by file name, by id, or \"last\" for the newest image."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "What to draw, or how to change the given images."},
                "images": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": crate::providers::images::MAX_INPUT_IMAGES,
                    "description": "Images of this conversation to edit or draw from (optional): file names, ids, or \"last\"."
                }
            },
            "required": ["prompt"],
            "additionalProperties": false
        }).into(),
    }
}

/// The tool as offered. It writes a file into the thread and is paid for, so it asks in the
/// most asking mode, like writing a file.
pub fn image_tool() -> OfferedTool {
    let spec = generate_image_spec();
    OfferedTool { digest: tool_digest(&spec), spec, risk: Risk::Write, mcp: None }
}
