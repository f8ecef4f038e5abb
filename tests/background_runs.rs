//! Runs that outlive their caller, over `/v1` on `anypath sandbox serve`:
//! a foreground run whose client gives up goes on and keeps its report
//! under the id the client chose; its events re-attach with
//! `Last-Event-ID`, every line once; a background run answers at once and
//! calls back, signed, only to a host the operator allows (boundary: the
//! outbound allowlist stays closed unless opened); `DELETE` interrupts; a
//! graceful stop keeps every report, a kill leaves `lost`, never nothing.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use reqwest::blocking::Client;
use serde_json::{Value, json};
use sha2::Sha256;

use common::service::Service;

const KEY: &str = "key-alice";

fn client(timeout: Duration) -> Client {
    Client::builder().timeout(timeout).build().expect("client")
}

/// One server-sent event.
#[derive(Debug)]
struct SseEvent {
    id: Option<u64>,
    event: String,
    data: Value,
}

/// Reads events from `url` (after `last_id`, when given) until `stop` says
/// so on one of them, then drops the connection.
fn read_events(base: &str, path: &str, last_id: Option<u64>, stop: impl Fn(&SseEvent) -> bool) -> Vec<SseEvent> {
    let mut request = client(Duration::from_secs(120)).get(format!("{base}{path}")).header("x-api-key", KEY).header("accept", "text/event-stream");
    if let Some(id) = last_id {
        request = request.header("last-event-id", id.to_string());
    }
    let response = request.send().expect("events");
    assert_eq!(response.status().as_u16(), 200);
    parse_events(response, stop)
}

/// Events from an SSE body until `stop` says so on one of them (an event
/// is dispatched at its blank line, whatever the order of its fields).
fn parse_events(body: impl Read, stop: impl Fn(&SseEvent) -> bool) -> Vec<SseEvent> {
    let mut lines = BufReader::new(body).lines();
    let mut events = Vec::new();
    let (mut id, mut event, mut data) = (None, String::new(), String::new());
    while let Some(Ok(line)) = lines.next() {
        if let Some(value) = line.strip_prefix("id:") {
            id = value.trim().parse().ok();
        } else if let Some(value) = line.strip_prefix("event:") {
            event = value.trim().to_owned();
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push_str(value.trim_start());
        } else if line.is_empty() && !event.is_empty() {
            let parsed = SseEvent { id: id.take(), event: std::mem::take(&mut event), data: serde_json::from_str(&data).unwrap_or(Value::Null) };
            data.clear();
            let done = stop(&parsed);
            events.push(parsed);
            if done {
                break;
            }
        }
    }
    events
}

fn stdout_text(events: &[SseEvent]) -> String {
    events.iter().filter(|e| e.event == "stdout").filter_map(|e| e.data["text"].as_str()).collect()
}

/// A 30-second run streamed to its client, who reads a few lines and goes
/// away: the run goes on; its events, re-attached with `Last-Event-ID`,
/// hold every line exactly once; its report is kept under the id the
/// client chose. A client that asked for the JSON answer and gave up finds
/// its run done too.
#[test]
fn a_run_outlives_its_client_and_its_events_reattach_without_loss_or_repeat() {
    let dir = common::scratch("anypath-runs-");
    let service = Service::start(dir.path());
    let (status, _) = service.json(KEY, "POST", "/v1/sessions", Some(json!({"session_id": "long"})));
    assert_eq!(status, 201);
    let code = "import time\nfor i in range(30):\n    print(f'line {i}', flush=True)\n    time.sleep(1)\n";
    let response = client(Duration::from_secs(120))
        .post(format!("{}/v1/sessions/long/run", service.base))
        .header("x-api-key", KEY)
        .header("accept", "text/event-stream")
        .json(&json!({"code": code, "run_id": "thirty-seconds"}))
        .send()
        .expect("the run");
    assert_eq!(response.headers().get("x-anypath-run-id").and_then(|v| v.to_str().ok()), Some("thirty-seconds"));
    let first = parse_events(response, |e| e.event == "stdout" && e.data["text"].as_str().is_some_and(|t| t.contains("line 3")));
    // The client went away there (the body was dropped), in the middle of the run.

    let (status, run) = service.json(KEY, "GET", "/v1/sessions/long/runs/thirty-seconds", None);
    assert_eq!((status, run["state"].as_str()), (200, Some("running")), "the run goes on without its client: {run}");

    let path = "/v1/sessions/long/runs/thirty-seconds/events";
    let last_seen = first.last().and_then(|e| e.id).expect("events carry ids");
    let middle = read_events(&service.base, path, Some(last_seen), |e| e.event == "stdout" && e.data["text"].as_str().is_some_and(|t| t.contains("line 8")));
    let last_seen = middle.last().and_then(|e| e.id).expect("events carry ids");
    let rest = read_events(&service.base, path, Some(last_seen), |e| e.event == "report" || e.event == "error");
    let end = rest.last().expect("the run's end");
    assert_eq!(end.event, "report", "{:?}", end.data);
    let ids: Vec<u64> = first.iter().chain(&middle).chain(&rest).filter_map(|e| e.id).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "every event once, in order, across the re-attaches");
    let text = format!("{}{}{}", stdout_text(&first), stdout_text(&middle), stdout_text(&rest));
    let expected: String = (0..30).map(|i| format!("line {i}\n")).collect();
    assert_eq!(text, expected, "every line exactly once");

    let (status, run) = service.json(KEY, "GET", "/v1/sessions/long/runs/thirty-seconds", None);
    assert_eq!((status, run["state"].as_str()), (200, Some("done")), "{run}");
    assert_eq!(run["report"]["stdout"].as_str(), Some(expected.as_str()), "the report is the one a foreground answer gives");
    assert_eq!(run["report"]["run_id"], "thirty-seconds");
    // Another tenant does not see it, and the id is not taken twice.
    let (status, _) = service.json("key-bob", "GET", "/v1/sessions/long/runs/thirty-seconds", None);
    assert_eq!(status, 404, "a run is its tenant's");
    let (status, again) = service.json(KEY, "POST", "/v1/sessions/long/run", Some(json!({"code": "1", "run_id": "thirty-seconds"})));
    assert_eq!((status, again["error"]["code"].as_str()), (409, Some("run_exists")), "{again}");

    // A client waiting for the JSON answer gives up; the run ends all the same.
    let gave_up = client(Duration::from_secs(1))
        .post(format!("{}/v1/sessions/long/run", service.base))
        .header("x-api-key", KEY)
        .json(&json!({"code": "import time\ntime.sleep(3)\nfinished = True\nprint('finished')", "run_id": "gave-up"}))
        .send();
    assert!(gave_up.is_err(), "the client was meant to give up before the run ended");
    let done = common::eventually(Duration::from_secs(20), || service.json(KEY, "GET", "/v1/sessions/long/runs/gave-up", None).1["state"] == "done");
    let (_, run) = service.json(KEY, "GET", "/v1/sessions/long/runs/gave-up", None);
    assert!(done, "{run}");
    assert_eq!(run["report"]["stdout"], "finished\n", "{run}");
}

/// A receiver of as many HTTP requests as `answers` holds, each answered
/// with its status line in turn: their heads and bodies.
fn receive(listener: TcpListener, answers: Vec<&'static str>) -> std::thread::JoinHandle<Vec<(String, Vec<u8>)>> {
    std::thread::spawn(move || {
        answers
            .into_iter()
            .map(|answer| {
                let (mut stream, _) = listener.accept().expect("a callback");
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).expect("a header line");
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                    head.push_str(&line);
                }
                let length = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                    .unwrap_or(0);
                let mut body = vec![0; length];
                reader.read_exact(&mut body).expect("the body");
                stream.write_all(format!("HTTP/1.1 {answer}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").as_bytes()).expect("answer");
                (head, body)
            })
            .collect()
    })
}

/// A background run answers 202 at once and, when it ends, its report goes
/// to the allowed receiver, signed with the service's key, and again after
/// the receiver failed once. A callback to a host not allowed is refused at
/// submit, and no run is made.
#[test]
fn a_background_run_calls_back_signed_and_only_to_an_allowed_host() {
    const SIGNING_KEY: &str = "background-runs-test-signing-key-32-bytes";
    let receiver = TcpListener::bind("127.0.0.1:0").expect("a receiver");
    let allowed = receiver.local_addr().expect("address").to_string();
    let dir = common::scratch("anypath-runs-callback-");
    let service = Service::start_with(dir.path(), &["--callback-allow", &allowed, "--signing-key", SIGNING_KEY]);
    let received = receive(receiver, vec!["503 Service Unavailable", "204 No Content"]);

    let elsewhere = TcpListener::bind("127.0.0.1:0").expect("another port");
    let refused_url = format!("http://{}/hook", elsewhere.local_addr().expect("address"));
    let (status, refused) = service.json(KEY, "POST", "/v1/sessions/cb/run", Some(json!({"code": "1", "background": true, "run_id": "refused", "callback_url": refused_url})));
    assert_eq!((status, refused["error"]["code"].as_str()), (403, Some("callback_not_allowed")), "{refused}");
    let (status, _) = service.json(KEY, "GET", "/v1/sessions/cb/runs/refused", None);
    assert_eq!(status, 404, "a refused run is not made");

    let started = Instant::now();
    let body = json!({"code": "import time\ntime.sleep(2)\nprint('called back')", "background": true, "run_id": "hooked", "callback_url": format!("http://{allowed}/hook")});
    let response = service.call(KEY, "POST", "/v1/sessions/cb/run", Some(body));
    assert_eq!(response.status().as_u16(), 202);
    assert!(started.elapsed() < Duration::from_secs(2), "202 before the run ends");
    assert_eq!(response.headers().get("location").and_then(|v| v.to_str().ok()), Some("/v1/sessions/cb/runs/hooked"));
    let accepted: Value = response.json().expect("status");
    assert_eq!((accepted["run_id"].as_str(), accepted["state"].as_str()), (Some("hooked"), Some("running")));

    let mut received = received.join().expect("the callback arrived");
    assert_eq!(received.len(), 2, "tried again after the receiver's 503");
    let (head, body) = received.pop().expect("the second try");
    assert_eq!(received[0].1, body, "the same report both times");
    let header = |name: &str| head.lines().find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_owned()));
    assert!(head.starts_with("POST /hook "), "{head}");
    assert_eq!(header("x-anypath-run-id").as_deref(), Some("hooked"));
    let signature = header("x-anypath-signature").expect("a signature");
    let (t, v1) = signature.split_once(",v1=").expect("t=...,v1=...");
    let t = t.strip_prefix("t=").expect("t=");
    let mut mac = Hmac::<Sha256>::new_from_slice(SIGNING_KEY.as_bytes()).expect("key");
    mac.update(format!("{t}.").as_bytes());
    mac.update(&body);
    assert_eq!(hex::encode(mac.finalize().into_bytes()), v1, "signed with the service's key over the time and the body");
    let status: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!((status["state"].as_str(), status["report"]["stdout"].as_str()), (Some("done"), Some("called back\n")), "{status}");
}

/// A foreground run that asked to be cancelled on disconnect is stopped
/// when its client goes away: its state is `interrupted`.
#[test]
fn a_run_asked_to_stop_with_its_client_is_interrupted_when_it_goes() {
    let dir = common::scratch("anypath-runs-cancel-");
    let service = Service::start(dir.path());
    let body = json!({"code": "print('spinning', flush=True)\nwhile True:\n    pass", "run_id": "tied", "cancel_on_disconnect": true});
    let gave_up = client(Duration::from_secs(2)).post(format!("{}/v1/sessions/tied/run", service.base)).header("x-api-key", KEY).json(&body).send();
    assert!(gave_up.is_err(), "the client was meant to give up");
    let stopped = common::eventually(Duration::from_secs(20), || service.json(KEY, "GET", "/v1/sessions/tied/runs/tied", None).1["state"] == "interrupted");
    let (_, run) = service.json(KEY, "GET", "/v1/sessions/tied/runs/tied", None);
    assert!(stopped, "{run}");
    assert_eq!(run["report"]["error"]["type_name"], "KeyboardInterrupt", "{run}");
}

/// `DELETE` on a running run interrupts it: its state is `interrupted`
/// and its report says where it stopped.
#[test]
fn deleting_a_run_interrupts_it() {
    let dir = common::scratch("anypath-runs-delete-");
    let service = Service::start(dir.path());
    let body = json!({"code": "print('spinning', flush=True)\nwhile True:\n    pass", "background": true, "run_id": "endless"});
    let (status, _) = service.json(KEY, "POST", "/v1/sessions/spin/run", Some(body));
    assert_eq!(status, 202);
    // Once its code runs (it said so), not while its session is being set up.
    let running = common::eventually(Duration::from_secs(20), || service.json(KEY, "GET", "/v1/sessions/spin/runs/endless", None).1["events"].as_u64() > Some(0));
    assert!(running, "the run never printed");
    let (status, asked) = service.json(KEY, "DELETE", "/v1/sessions/spin/runs/endless", None);
    assert_eq!(status, 202, "{asked}");
    let ended = common::eventually(Duration::from_secs(20), || service.json(KEY, "GET", "/v1/sessions/spin/runs/endless", None).1["state"] == "interrupted");
    let (_, run) = service.json(KEY, "GET", "/v1/sessions/spin/runs/endless", None);
    assert!(ended, "{run}");
    assert_eq!(run["report"]["error"]["type_name"], "KeyboardInterrupt", "{run}");
    let (status, _) = service.json(KEY, "DELETE", "/v1/sessions/spin/runs/nothing-by-this-id", None);
    assert_eq!(status, 404);
}

/// A command over `/v1` is tracked as a run is: in the background it answers
/// at once and is listed while it runs; its output re-attaches with
/// `Last-Event-ID`, every line once; `DELETE` stops it (exit status 130); a
/// streamed command's events end with its report; another tenant finds none
/// of it.
#[test]
fn commands_are_tracked_by_id_as_runs_are() {
    let dir = common::scratch("anypath-tracked-commands-");
    let service = Service::start(dir.path());
    let lines = "for i in 1 2 3 4; do echo line $i; sleep 0.3; done";
    let (status, started) = service.json(KEY, "POST", "/v1/sessions/cmd/commands", Some(json!({"command": lines, "background": true})));
    assert_eq!((status, started["state"].as_str()), (202, Some("running")), "{started}");
    let id = started["command_id"].as_str().expect("an id").to_owned();
    let (_, listed) = service.json(KEY, "GET", "/v1/sessions/cmd/commands", None);
    assert!(listed.as_array().is_some_and(|all| all.iter().any(|c| c["command_id"] == json!(id))), "listed while it runs: {listed}");
    let events = format!("/v1/sessions/cmd/commands/{id}/events");
    let first = read_events(&service.base, &events, None, |e| e.event == "stdout");
    let seen = first.last().and_then(|e| e.id).expect("an event id");
    let rest = read_events(&service.base, &events, Some(seen), |e| e.event == "report");
    assert_eq!(stdout_text(&first) + &stdout_text(&rest), "line 1\nline 2\nline 3\nline 4\n", "every line once");
    assert_eq!(rest.last().map(|e| e.data["exit_code"].clone()), Some(json!(0)));
    let (_, done) = service.json(KEY, "GET", &format!("/v1/sessions/cmd/commands/{id}"), None);
    assert_eq!((done["state"].as_str(), done["report"]["stdout"].as_str()), (Some("done"), Some("line 1\nline 2\nline 3\nline 4\n")), "{done}");
    let (_, listed) = service.json(KEY, "GET", "/v1/sessions/cmd/commands", None);
    assert_eq!(listed, json!([]), "an ended command is not listed");

    let (_, sleeping) = service.json(KEY, "POST", "/v1/sessions/cmd/commands", Some(json!({"command": "echo asleep; sleep 60", "background": true})));
    let path = format!("/v1/sessions/cmd/commands/{}", sleeping["command_id"].as_str().expect("an id"));
    assert!(common::eventually(Duration::from_secs(20), || service.json(KEY, "GET", &path, None).1["events"].as_u64() > Some(0)), "it never started");
    let (status, asked) = service.json(KEY, "DELETE", &path, None);
    assert_eq!(status, 202, "{asked}");
    let stopped = common::eventually(Duration::from_secs(20), || service.json(KEY, "GET", &path, None).1["state"] == "interrupted");
    let (_, stopped_status) = service.json(KEY, "GET", &path, None);
    assert!(stopped, "{stopped_status}");
    assert_eq!(stopped_status["report"]["exit_code"], json!(130), "{stopped_status}");

    // With its stdin open, a running pipeline answers each write; `eof` ends it.
    let body = json!({"command": "cat | tr a-z A-Z", "background": true, "stdin_open": true, "stdin": "first\n"});
    let (_, piped) = service.json(KEY, "POST", "/v1/sessions/cmd/commands", Some(body));
    let path = format!("/v1/sessions/cmd/commands/{}", piped["command_id"].as_str().expect("an id"));
    assert!(common::eventually(Duration::from_secs(20), || service.json(KEY, "GET", &path, None).1["events"].as_u64() > Some(0)), "the first line came through");
    let (status, _) = service.json(KEY, "POST", &format!("{path}/stdin"), Some(json!({"data": "second\n", "eof": true})));
    assert_eq!(status, 204);
    assert!(common::eventually(Duration::from_secs(20), || service.json(KEY, "GET", &path, None).1["state"] == "done"), "eof ended it");
    let (_, piped) = service.json(KEY, "GET", &path, None);
    assert_eq!(piped["report"]["stdout"], json!("FIRST\nSECOND\n"), "{piped}");
    let (status, closed) = service.json(KEY, "POST", &format!("{path}/stdin"), Some(json!({"data": "late\n"})));
    assert_eq!((status, closed["error"]["code"].as_str()), (409, Some("stdin_not_open")), "{closed}");

    let (status, missing) = service.json("key-bob", "GET", &format!("/v1/sessions/cmd/commands/{id}"), None);
    assert_eq!((status, missing["error"]["code"].as_str()), (404, Some("no_such_command")), "another tenant's: {missing}");
    assert!(missing["error"]["request_id"].is_string());

    let response = client(Duration::from_secs(60))
        .post(format!("{}/v1/sessions/cmd/commands", service.base))
        .header("x-api-key", KEY)
        .header("accept", "text/event-stream")
        .json(&json!({"command": "echo a; echo b >&2; exit 4"}))
        .send()
        .expect("a streamed command");
    assert!(response.headers().get("x-anypath-command-id").is_some());
    let streamed = parse_events(response, |e| e.event == "report" || e.event == "error");
    assert_eq!(stdout_text(&streamed), "a\n");
    assert!(streamed.iter().any(|e| e.event == "stderr" && e.data["text"] == json!("b\n")), "{streamed:?}");
    assert_eq!(streamed.last().map(|e| (e.event.as_str(), e.data["exit_code"].clone())), Some(("report", json!(4))), "{streamed:?}");
}

/// 100 background runs from 10 tenants, then a graceful stop while they
/// run and wait: the stop lets them finish, and the next process on the
/// same data directory gives every report. A run still going when the
/// process is killed is `lost` after the restart.
#[test]
fn a_graceful_stop_keeps_every_report_and_a_kill_leaves_lost_runs() {
    const TENANTS: usize = 10;
    const RUNS_EACH: usize = 10;
    let dir = common::scratch("anypath-runs-restart-");
    let keys: Vec<String> = (0..TENANTS).map(|t| format!("key-{t}:tenant-{t}")).collect();
    let keys = keys.join(",");
    // Each tenant's runs wait their turn rather than being refused.
    let args = ["--api-keys", keys.as_str(), "--queue-depth", "200", "--tenant-queue-depth", "20"];
    let mut service = Service::start_open(dir.path(), &args);
    for t in 0..TENANTS {
        for r in 0..RUNS_EACH {
            let body = json!({"code": format!("import time\ntime.sleep(0.2)\nprint('run {t}-{r}')"), "background": true, "run_id": format!("r{r}")});
            let (status, answer) = service.json(&format!("key-{t}"), "POST", &format!("/v1/sessions/s{r}/run"), Some(body));
            assert_eq!(status, 202, "tenant {t}'s run {r}: {answer}");
        }
    }
    let stopped = service.process.terminate();
    assert!(stopped.success(), "the graceful stop ended with {stopped:?}");

    let mut service = Service::start_open(dir.path(), &args);
    for t in 0..TENANTS {
        for r in 0..RUNS_EACH {
            let (status, run) = service.json(&format!("key-{t}"), "GET", &format!("/v1/sessions/s{r}/runs/r{r}"), None);
            assert_eq!((status, run["state"].as_str()), (200, Some("done")), "tenant {t}'s run {r}: {run}");
            assert_eq!(run["report"]["stdout"].as_str(), Some(format!("run {t}-{r}\n").as_str()), "{run}");
        }
    }

    let body = json!({"code": "import time\ntime.sleep(60)", "background": true, "run_id": "cut-short"});
    let (status, _) = service.json("key-0", "POST", "/v1/sessions/doomed/run", Some(body));
    assert_eq!(status, 202);
    service.process.kill();
    let service = Service::start_open(dir.path(), &args);
    let lost = common::eventually(Duration::from_secs(10), || service.json("key-0", "GET", "/v1/sessions/doomed/runs/cut-short", None).1["state"] == "lost");
    let (_, run) = service.json("key-0", "GET", "/v1/sessions/doomed/runs/cut-short", None);
    assert!(lost, "{run}");
    assert_eq!(run["error"]["code"], "run_lost", "{run}");
}

/// A session restored from an image taken after a run with live output
/// (here a fork's first run) streams its next run too, on each runtime: the
/// image keeps the handle of the stdout stream that live output goes out
/// on, and the restored instance holds the same one. Before, on `python`,
/// that run trapped (`unknown handle index`).
#[test]
fn live_output_after_a_restore_of_a_live_run_works_on_each_runtime() {
    let dir = common::scratch("anypath-runs-restore-");
    let service = Service::start(dir.path());
    let streamed = |session: &str, body: Value| {
        let response = client(Duration::from_secs(60))
            .post(format!("{}/v1/sessions/{session}/run", service.base))
            .header("x-api-key", KEY)
            .header("accept", "text/event-stream")
            .json(&body)
            .send()
            .expect("the run");
        parse_events(response, |e| e.event == "report" || e.event == "error")
    };
    for runtime in ["python", "python-data"] {
        let first = format!("live-{runtime}");
        let events = streamed(&first, json!({"code": "x = 41\nprint('first')", "runtime": runtime}));
        assert_eq!(stdout_text(&events), "first\n", "{runtime}: {events:?}");
        let fork = format!("fork-{runtime}");
        let (status, forked) = service.json(KEY, "POST", &format!("/v1/sessions/{first}/fork"), Some(json!({"session_id": fork})));
        assert!((200..300).contains(&status), "{forked}");
        let events = streamed(&fork, json!({"code": "print(x + 1)"}));
        let end = events.last().expect("an end");
        assert_eq!((end.event.as_str(), end.data["error"].clone()), ("report", Value::Null), "{runtime}: {:?}", end.data);
        assert_eq!(stdout_text(&events), "42\n", "{runtime}: the restored state, streamed");
    }
}
