//! The key-value store of `anypath up` under concurrent creates: writes from
//! many requests share commits (group commit), yet every create gets its own
//! id, every acknowledged create is listed, and all of them survive the
//! process being killed right after the last acknowledgement.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use common::app::{App, Build, repo, temp_kv};
use serde::Deserialize;

const CLIENTS: usize = 8;
const EACH: usize = 50;

#[derive(Debug, Deserialize)]
struct Member {
    id: i64,
    name: String,
}

/// This build on the project's manifest, on SQLite whatever store the suite chose.
fn build() -> Build {
    Build { binary: PathBuf::from(env!("CARGO_BIN_EXE_anypath")), manifest: repo().join("spin.toml"), runner: common::runner_path() }
}

/// Every member the app lists, by id.
fn listed(app: &App) -> BTreeMap<i64, String> {
    let response = app.send("GET", "/members/", None);
    assert_eq!(response.status(), 200);
    // Without paging parameters the list is every member, unpaged.
    let members: Vec<Member> = response.json().expect("the members");
    let count = members.len();
    let by_id: BTreeMap<i64, String> = members.into_iter().map(|m| (m.id, m.name)).collect();
    assert_eq!(by_id.len(), count, "no id is listed twice");
    by_id
}

#[test]
fn concurrent_creates_get_distinct_ids_are_all_listed_and_survive_a_kill() {
    let kv = temp_kv("group-commit");
    let mut app = App::start_build(&kv, &build(), &[]);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let base = app.base.clone();
            std::thread::spawn(move || {
                let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
                (0..EACH)
                    .map(|n| {
                        let name = format!("client{c}-{n}");
                        let response = client
                            .post(format!("{base}/members/"))
                            .json(&serde_json::json!({"name": name, "age": n}))
                            .send()
                            .expect("the app answers");
                        assert_eq!(response.status(), 201, "create {name}");
                        let member: Member = response.json().expect("the created member");
                        assert_eq!(member.name, name);
                        (member.id, name)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let created: Vec<(i64, String)> = clients.into_iter().flat_map(|c| c.join().expect("a client")).collect();
    let mut acknowledged: BTreeMap<i64, String> = created.iter().cloned().collect();
    assert_eq!(acknowledged.len(), CLIENTS * EACH, "every create got an id of its own");
    assert_eq!(listed(&app), acknowledged, "a GET of the list returns every create");

    let last = app.send("POST", "/members/", Some(serde_json::json!({"name": "last", "age": 1})));
    assert_eq!(last.status(), 201);
    let last: Member = last.json().expect("the created member");
    // Killed right after the last acknowledgement, as a crash would.
    app.process.kill();
    acknowledged.insert(last.id, last.name);
    assert_eq!(acknowledged.len(), CLIENTS * EACH + 1, "the last create got a new id too");

    let app = App::start_build(&kv, &build(), &[]);
    assert_eq!(listed(&app), acknowledged, "every acknowledged create is there after the kill");
}
