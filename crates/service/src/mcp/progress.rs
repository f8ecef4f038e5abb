//! What `run_python` sends besides its report: the run's output and results
//! as progress notifications while it goes on (when the client sent a
//! progress token), and its results as content items a model reads.

use anypath_interpreter::RunReport;
use anypath_wire::{LiveEvent, ResultKind};
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};

use super::tool_error::ToolError;
use crate::interpreter_service::ServiceError;
use crate::live_run::LiveEvents;

/// Sends each of the run's live events as a progress notification until
/// its events end: `message` is the new output (stderr marked), or a
/// result's text.
pub(super) async fn forward(peer: Peer<RoleServer>, token: ProgressToken, mut events: LiveEvents) {
    let mut sent = 0u32;
    while let Some(event) = events.next().await {
        sent += 1;
        let mut notification = ProgressNotificationParam::new(token.clone(), f64::from(sent));
        notification.message = Some(message(&event));
        if peer.notify_progress(notification).await.is_err() {
            // The client is gone; the run goes on and its report is kept.
            return;
        }
    }
}

fn message(event: &LiveEvent) -> String {
    match event {
        LiveEvent::Stdout(text) => text.clone(),
        LiveEvent::Stderr(text) => format!("[stderr] {text}"),
        LiveEvent::Result(result) => match result.kind {
            ResultKind::Image => format!("[image] {}", result.text),
            ResultKind::Text => format!("[result] {}", result.text),
        },
    }
}

/// The tool's answer: the report as structured content; as content items,
/// the report's JSON (pictures left out of it, they follow), then each
/// result: its text, and a picture as image content so a model sees it
/// without another call (SVG stays text).
pub(super) fn run_result(report: &RunReport) -> Result<CallToolResult, ToolError> {
    let structured = serde_json::to_value(report).map_err(|e| ServiceError::Internal(e.to_string()))?;
    let mut readable = report.clone();
    for result in &mut readable.cell.results {
        for (kind, data) in result.mime.iter_mut().filter(|(kind, _)| is_picture(kind)) {
            *data = format!("<{kind}: {} bytes of base64, attached as image content>", data.len());
        }
    }
    let text = serde_json::to_string(&readable).map_err(|e| ServiceError::Internal(e.to_string()))?;
    let mut answer = CallToolResult::structured(structured);
    answer.content = vec![ContentBlock::text(text)];
    for result in &report.cell.results {
        answer.content.push(ContentBlock::text(result.text.clone()));
        for (kind, data) in result.mime.iter().filter(|(kind, _)| is_picture(kind)) {
            answer.content.push(ContentBlock::image(data.clone(), kind.clone()));
        }
    }
    Ok(answer)
}

/// A binary picture (base64), which MCP carries as image content.
fn is_picture(kind: &str) -> bool {
    kind.starts_with("image/") && kind != "image/svg+xml"
}
