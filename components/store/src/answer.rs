//! The store's answers on the wire: a status and a JSON body, the one shape
//! its successes and its errors share.

use spin_sdk::http::Response;

/// An answer with a JSON body.
pub fn json_response(status: u16, body: Vec<u8>) -> Response {
    Response::builder().status(status).header("content-type", "application/json").body(body).build()
}
