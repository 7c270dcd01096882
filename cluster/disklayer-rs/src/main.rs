//! Usage: faultline-disk BACKING MOUNTPOINT CONTROL_SOCKET
//!
//! Mounts the disk layer over BACKING at MOUNTPOINT and answers its control socket (see the library's
//! documentation and docs/disk.md) until it is unmounted.
use faultline_disk::filesystem::Layer;
use faultline_disk::{control, inodes::Inodes};
use fuser::{Config, MountOption, Session, SessionACL};
use std::fs;
use std::os::unix::net::UnixListener;
use std::sync::{Arc, Mutex};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: faultline-disk BACKING MOUNTPOINT CONTROL_SOCKET");
        std::process::exit(2);
    }
    let backing = fs::canonicalize(&args[1]).unwrap_or_else(|e| {
        eprintln!("faultline-disk: backing directory {}: {}", args[1], e);
        std::process::exit(2);
    });
    let state = Arc::new(Mutex::new(Inodes::default()));
    let mut cfg = Config::default();
    cfg.mount_options = vec![
        MountOption::FSName("faultline-disk".into()),
        MountOption::Subtype("faultline-disk".into()),
    ];
    cfg.acl = SessionACL::All;
    let layer = Layer::new(backing, state.clone());
    let session = Session::new(layer, &args[2], &cfg).unwrap_or_else(|e| {
        eprintln!("faultline-disk: mount {}: {}", args[2], e);
        std::process::exit(1);
    });
    let _ = fs::remove_file(&args[3]);
    let listener = UnixListener::bind(&args[3]).unwrap_or_else(|e| {
        eprintln!("faultline-disk: control socket {}: {}", args[3], e);
        std::process::exit(1);
    });
    let notifier = session.notifier();
    std::thread::spawn(move || control::serve(listener, state, notifier));
    if let Err(e) = session.run() {
        eprintln!("faultline-disk: {}", e);
        std::process::exit(1);
    }
}
