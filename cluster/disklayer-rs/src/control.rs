//! The control socket: one command a connection, one JSON line in answer.
//!   lose        drop every held byte (what a power loss would lose)
//!   checkpoint  write every held byte through and fdatasync it
//!   stats       what is held now
//! `lose`, `checkpoint` and `stats` answer `{"ok": true, "files": [...], "bytes": N}`: what was held when
//! the command came (files by path, bytes written since their last fsync).
use crate::inodes::Inodes;
use fuser::{INodeNo, Notifier};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::sync::{Arc, Mutex};

/// `text` as a JSON string, quotes included: backslashes, quotes and control characters escaped, so every
/// answer parses whatever a path or a command holds.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_error(message: &str) -> String {
    format!("{{\"ok\": false, \"error\": {}}}\n", json_string(message))
}

fn json_answer(files: &[String], bytes: u64) -> String {
    let quoted: Vec<String> = files.iter().map(|f| json_string(f)).collect();
    format!(
        "{{\"ok\": true, \"files\": [{}], \"bytes\": {}}}\n",
        quoted.join(", "),
        bytes
    )
}

/// Runs one command and answers it; `invalidate` is told every inode whose held data a loss dropped.
pub fn command(state: &Mutex<Inodes>, cmd: &str, mut invalidate: impl FnMut(u64)) -> String {
    let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
    let (files, bytes) = st.held();
    match cmd {
        "stats" => json_answer(&files, bytes),
        "lose" => {
            let mut touched = vec![];
            for (ino, n) in st.nodes.iter_mut() {
                if n.held.lose() {
                    touched.push(*ino);
                }
            }
            drop(st);
            for ino in touched {
                invalidate(ino);
            }
            json_answer(&files, bytes)
        }
        "checkpoint" => {
            let mut failed = vec![];
            for n in st.nodes.values_mut() {
                if let Err(e) = n.held.sync() {
                    failed.push(format!("{}: {}", n.rel.display(), e));
                }
            }
            if failed.is_empty() {
                json_answer(&files, bytes)
            } else {
                json_error(&failed.join("; "))
            }
        }
        _ => json_error(&format!("unknown command {cmd}")),
    }
}

/// Answers the control socket's connections one at a time, for as long as the layer runs.
pub fn serve(listener: UnixListener, state: Arc<Mutex<Inodes>>, notifier: Notifier) {
    for conn in listener.incoming().flatten() {
        let mut line = String::new();
        let mut reader = BufReader::new(&conn);
        if reader.read_line(&mut line).is_err() {
            continue;
        }
        let answer = command(&state, line.trim(), |ino| {
            // the kernel's page cache may hold what was just dropped
            let _ = notifier.inval_inode(INodeNo(ino), 0, -1);
        });
        let _ = (&conn).write_all(answer.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::Scratch;
    use std::path::Path;

    /// A table with one file per name, each holding `data` written over an empty backing file.
    fn table_with(s: &Scratch, files: &[(&str, &[u8])]) -> (Mutex<Inodes>, Vec<u64>) {
        let mut table = Inodes::default();
        let mut inos = vec![];
        for (name, data) in files {
            let ino = table.ino_for(Path::new(name));
            let node = table.nodes.get_mut(&ino).unwrap();
            node.held.attach(s.file(name, b""));
            node.held.write(0, data).unwrap();
            inos.push(ino);
        }
        (Mutex::new(table), inos)
    }

    fn run(state: &Mutex<Inodes>, cmd: &str) -> (String, Vec<u64>) {
        let mut invalidated = vec![];
        let answer = command(state, cmd, |ino| invalidated.push(ino));
        invalidated.sort();
        (answer, invalidated)
    }

    #[test]
    fn stats_answers_what_is_held_and_changes_nothing() {
        let s = Scratch::new();
        let (state, _) = table_with(&s, &[("b", b"xyz"), ("a", b"12")]);
        let answer = "{\"ok\": true, \"files\": [\"a\", \"b\"], \"bytes\": 5}\n";
        assert_eq!(run(&state, "stats"), (answer.to_string(), vec![]));
        assert_eq!(run(&state, "stats").0, answer);
        assert_eq!(s.on_disk("a"), b"");
    }

    #[test]
    fn lose_answers_what_it_dropped_and_invalidates_those_inodes() {
        let s = Scratch::new();
        let (state, inos) = table_with(&s, &[("a", b"12"), ("b", b"xyz")]);
        let (answer, invalidated) = run(&state, "lose");
        assert_eq!(
            answer,
            "{\"ok\": true, \"files\": [\"a\", \"b\"], \"bytes\": 5}\n"
        );
        assert_eq!(invalidated, inos);
        assert_eq!(s.on_disk("a"), b"");
        assert_eq!(
            run(&state, "stats").0,
            "{\"ok\": true, \"files\": [], \"bytes\": 0}\n"
        );
        assert_eq!(run(&state, "lose").1, Vec::<u64>::new());
    }

    #[test]
    fn checkpoint_writes_everything_through() {
        let s = Scratch::new();
        let (state, _) = table_with(&s, &[("a", b"12"), ("b", b"xyz")]);
        let (answer, invalidated) = run(&state, "checkpoint");
        assert_eq!(
            answer,
            "{\"ok\": true, \"files\": [\"a\", \"b\"], \"bytes\": 5}\n"
        );
        assert!(invalidated.is_empty());
        assert_eq!(
            (s.on_disk("a"), s.on_disk("b")),
            (b"12".to_vec(), b"xyz".to_vec())
        );
        run(&state, "lose");
        assert_eq!(s.on_disk("b"), b"xyz");
    }

    #[test]
    fn a_failed_checkpoint_names_the_file() {
        let mut table = Inodes::default();
        let ino = table.ino_for(Path::new("no \"file\""));
        table.nodes.get_mut(&ino).unwrap().held.write(0, b"x").unwrap();
        let (answer, _) = run(&Mutex::new(table), "checkpoint");
        assert!(
            answer.starts_with("{\"ok\": false, \"error\": \"no \\\"file\\\": "),
            "{answer}"
        );
        assert!(answer.ends_with("\"}\n"), "{answer}");
    }

    #[test]
    fn file_names_are_quoted_as_json() {
        let s = Scratch::new();
        let (state, _) = table_with(&s, &[("q\"uote", b"1"), ("back\\slash", b"1")]);
        let answer = "{\"ok\": true, \"files\": [\"back\\\\slash\", \"q\\\"uote\"], \"bytes\": 2}\n";
        assert_eq!(run(&state, "stats").0, answer);
    }

    #[test]
    fn an_unknown_command_is_refused() {
        let state = Mutex::new(Inodes::default());
        let cases = [
            ("drop", "{\"ok\": false, \"error\": \"unknown command drop\"}\n"),
            (
                "a\"b\\c\td",
                "{\"ok\": false, \"error\": \"unknown command a\\\"b\\\\c\\u0009d\"}\n",
            ),
        ];
        for (cmd, expected) in cases {
            let (answer, invalidated) = run(&state, cmd);
            assert_eq!(answer, expected);
            assert!(invalidated.is_empty());
        }
    }
}
