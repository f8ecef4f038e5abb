//! The REST face as frontends written for json-server, react-admin's data
//! providers and Refine call it, over real HTTP against `anypath up`: bare
//! array lists with their totals in headers, json-server's and
//! ra-data-simple-rest's list vocabularies beside the seed's own, nested
//! routes, a DELETE that answers the record when asked, and form bodies.

use crate::common;

use common::app::{App, json_of, temp_kv};
use reqwest::blocking::{Client, Response};
use serde_json::{Value, json};

fn header(response: &Response, name: &str) -> String {
    response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned()
}

fn ids(body: &Value) -> Vec<i64> {
    body.as_array().unwrap_or_else(|| panic!("a bare array: {body}")).iter().map(|d| d["id"].as_i64().unwrap()).collect()
}

/// Five posts and three comments, the json-server example's shape.
fn seeded(name: &str) -> App {
    let app = App::start(&temp_kv(name));
    for (title, views) in [("alpha snow", 5), ("beta", 10), ("gamma", 5), ("delta", 20), ("Alpine", 1)] {
        assert_eq!(app.send("POST", "/posts/", Some(json!({"title": title, "views": views}))).status(), 201);
    }
    for (post, body) in [(1, "first"), (1, "second"), (3, "third")] {
        assert_eq!(app.send("POST", "/comments/", Some(json!({"postId": post, "body": body}))).status(), 201);
    }
    app
}

#[test]
fn a_plain_list_is_a_bare_array_with_its_total_in_headers() {
    let app = seeded("dialect-plain");
    let response = app.send("GET", "/posts", None);
    assert_eq!(header(&response, "x-total-count"), "5");
    assert_eq!(header(&response, "content-range"), "posts 0-4/5");
    assert_eq!(ids(&json_of(response).1), vec![1, 2, 3, 4, 5]);
    // Cache-busters, tracking keys and unknown controls never filter.
    for query in ["_=1700000000000", "utm_source=x", "_unknown=1&utm_campaign=y"] {
        assert_eq!(ids(&json_of(app.send("GET", &format!("/posts?{query}"), None)).1).len(), 5, "{query}");
    }
    // The seed's own paging keys keep the envelope.
    let (_, page) = json_of(app.send("GET", "/posts/?limit=2&offset=1&sort=-views", None));
    assert_eq!(page["page"], json!({"limit": 2, "offset": 1, "total": 5}));
    assert_eq!(page["items"][0]["title"], "beta");
}

#[test]
fn json_server_vocabulary_pages_sorts_searches_and_filters() {
    let app = seeded("dialect-json-server");
    let get = |query: &str| json_of(app.send("GET", &format!("/posts?{query}"), None)).1;
    assert_eq!(ids(&get("id=1&id=3")), vec![1, 3], "repeated keys are any-of");
    assert_eq!(ids(&get("_sort=views,title&_order=desc,asc&_start=0&_end=3")), vec![4, 2, 1]);
    assert_eq!(ids(&get("views_gte=5&views_lte=10")), vec![1, 2, 3]);
    assert_eq!(ids(&get("views_ne=5")), vec![2, 4, 5]);
    assert_eq!(ids(&get("title_like=^al")), vec![1, 5], "a case-insensitive regular expression");
    assert_eq!(ids(&get("q=SNOW")), vec![1]);
    let paged = app.send("GET", "/posts?_page=2&_limit=2", None);
    assert_eq!(header(&paged, "x-total-count"), "5");
    let link = header(&paged, "link");
    assert!(link.contains("_page=1>; rel=\"prev\"") && link.contains("_page=3>; rel=\"next\"") && link.contains("_page=3>; rel=\"last\""), "{link}");
    assert_eq!(ids(&json_of(paged).1), vec![3, 4]);
    assert_eq!(ids(&get("_page=2&_per_page=3")), vec![4, 5], "_per_page sizes a page as _limit does");
    // A page past the last has no records and, as on json-server, no links.
    let beyond = app.send("GET", "/posts?_page=9&_limit=2", None);
    assert_eq!(header(&beyond, "link"), "");
    assert_eq!(ids(&json_of(beyond).1), Vec::<i64>::new());
    let embedded = get("_embed=comments&id=1");
    assert_eq!(embedded[0]["comments"].as_array().map(Vec::len), Some(2), "{embedded}");
    let (_, expanded) = json_of(app.send("GET", "/comments?_expand=post&postId=3", None));
    assert_eq!(expanded[0]["post"]["title"], "gamma", "{expanded}");
}

#[test]
fn simple_rest_parameters_and_the_range_header() {
    let app = seeded("dialect-simple-rest");
    let query = "sort=%5B%22views%22%2C%22DESC%22%5D&range=%5B0%2C1%5D&filter=%7B%22q%22%3A%22e%22%7D";
    let response = app.send_as("GET", &format!("/posts?{query}"), None, &[("range", "posts=0-1")]);
    assert_eq!(response.status(), 206);
    assert_eq!(header(&response, "content-range"), "posts 0-1/3", "beta, delta and Alpine have an e");
    assert_eq!(ids(&json_of(response).1), vec![4, 2]);
    let many = json_of(app.send("GET", "/posts?filter=%7B%22id%22%3A%5B1%2C3%5D%7D", None)).1;
    assert_eq!(ids(&many), vec![1, 3]);
    // getMany with no ids asks for nothing, not for everything.
    assert_eq!(ids(&json_of(app.send("GET", "/posts?filter=%7B%22id%22%3A%5B%5D%7D", None)).1), Vec::<i64>::new());
    // A window past the last record selects nothing: 200, and the total.
    let past = app.send_as("GET", "/posts", None, &[("range", "posts=10-19")]);
    assert_eq!((past.status().as_u16(), header(&past, "content-range")), (200, "posts */5".to_owned()));
    for (malformed, named) in [
        ("range=%5B0%2C", "`range`"),
        ("sort=%5B%22views%22%5D", "`sort`"),
        ("filter=%5B1%5D", "`filter`"),
        ("_start=x&_end=2", "`_start`"),
        ("_sort=a&_order=up", "`_order`"),
        ("title_like=(a", "`title_like`"),
        ("_embed=a,b,c&_expand=d,e", "`_embed` and `_expand`"),
    ] {
        let (status, body) = json_of(app.send("GET", &format!("/posts?{malformed}"), None));
        assert_eq!(status, 400, "{malformed}: {body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains(named)), "{malformed} names {named}: {body}");
    }
}

#[test]
fn nested_routes_list_and_create_a_parents_children() {
    let app = seeded("dialect-nested");
    assert_eq!(ids(&json_of(app.send("GET", "/posts/1/comments", None)).1), vec![1, 2]);
    let created = app.send("POST", "/posts/3/comments", Some(json!({"body": "fourth"})));
    assert_eq!(created.status(), 201);
    assert_eq!(json_of(created).1["postId"], 3);
    assert_eq!(ids(&json_of(app.send("GET", "/posts/3/comments", None)).1), vec![3, 4]);
    // The children of a post that does not exist are not found, and none is created for it.
    assert_eq!(app.send("GET", "/posts/99/comments", None).status(), 404);
    assert_eq!(app.send("POST", "/posts/99/comments", Some(json!({"body": "orphan"}))).status(), 404);
    assert_eq!(header(&app.send("GET", "/comments", None), "x-total-count"), "4", "the refused POST wrote nothing");
}

#[test]
fn delete_answers_the_record_when_asked_and_204_otherwise() {
    let app = seeded("dialect-delete");
    let asked = app.send_as("DELETE", "/posts/1", None, &[("prefer", "return=representation")]);
    assert_eq!(asked.status(), 200);
    assert_eq!(header(&asked, "preference-applied"), "return=representation");
    assert_eq!(json_of(asked).1["title"], "alpha snow");
    assert_eq!(app.send("DELETE", "/posts/2", None).status(), 204, "the seed's default");
    let app = App::start_with(&temp_kv("dialect-delete-record"), "spin.toml", &[("SPIN_VARIABLE_DELETE_REPLY", "record")]);
    assert_eq!(app.send("POST", "/posts/", Some(json!({"title": "x"}))).status(), 201);
    let deleted = app.send("DELETE", "/posts/1", None);
    assert_eq!((deleted.status().as_u16(), json_of(deleted).1["id"].clone()), (200, json!(1)), "delete_reply = record");
}

#[test]
fn a_form_posts_directly_and_other_bodies_are_refused_with_415() {
    let app = App::start(&temp_kv("dialect-forms"));
    let client = Client::new();
    let form = client.post(format!("{}/people/", app.base)).form(&[("name", "Ada"), ("tag", "a"), ("tag", "b")]).send().expect("sent");
    assert_eq!(form.status(), 201);
    assert_eq!(json_of(form).1, json!({"id": 1, "name": "Ada", "tag": ["a", "b"]}));
    // `curl -d '{...}'` labels JSON as a form: it is still JSON.
    let curl = client.post(format!("{}/people/", app.base)).header("content-type", "application/x-www-form-urlencoded").body(r#"{"name": "Grace"}"#).send().expect("sent");
    assert_eq!(json_of(curl).1["name"], "Grace");
    let text = client.post(format!("{}/people/", app.base)).header("content-type", "text/plain").body("name: Ada").send().expect("sent");
    let (status, body) = json_of(text);
    assert_eq!((status.as_u16(), body["error"]["code"].as_str()), (415, Some("unsupported_media_type")), "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("application/json") && m.contains("x-www-form-urlencoded")), "{body}");
}

#[test]
fn cors_exposes_the_list_headers() {
    let app = App::start_with(&temp_kv("dialect-cors"), "spin.toml", &[("SPIN_VARIABLE_CORS_ALLOWED_ORIGINS", "http://admin.example")]);
    let response = app.send_as("GET", "/posts", None, &[("origin", "http://admin.example")]);
    let exposed = header(&response, "access-control-expose-headers").to_ascii_lowercase();
    for name in ["x-total-count", "content-range", "link"] {
        assert!(exposed.contains(name), "{exposed}");
    }
    // A browser asks before it sends ra-data-simple-rest's Range or a Prefer.
    let preflight = app.send_as(
        "OPTIONS",
        "/posts",
        None,
        &[("origin", "http://admin.example"), ("access-control-request-method", "DELETE"), ("access-control-request-headers", "range,prefer")],
    );
    let allowed = header(&preflight, "access-control-allow-headers").to_ascii_lowercase();
    assert!(allowed.contains("range") && allowed.contains("prefer"), "{allowed}");
}
