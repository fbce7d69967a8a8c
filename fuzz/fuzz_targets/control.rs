//! Fuzz target: the control socket's requests, as the daemon takes them from a client.
//!
//! The first byte chooses how the rest arrives (the size of the pieces a client writes, and
//! whether it is sent over and over, past the size limit); the rest is what the client writes.
//! The bytes go through the server's line reader (`RequestLine`) piece by piece and through
//! `parse_request` at once: never a panic, both agree, the reader never keeps more than
//! `MAX_REQUEST` bytes, and an error reply stays short whatever the request held. A request
//! that parses prints (as lagctl sends it) to a line that parses to the same request; a `set`
//! runs on a bond as the daemon's loop runs it: a refused change leaves the options as they
//! were, an accepted one prints options that parse again.
#![no_main]

use lagd::control::{
    MAX_REQUEST, Request, RequestLine, TooLong, error_reply, parse_request,
};
use lagd_proto::bond::{Bond, BondOptions, PortInfo};
use lagd_proto::time::Instant;
use lagd_proto::wire::EthernetAddress;
use libfuzzer_sys::fuzz_target;

/// Longest error reply: 64 characters of the request and 192 of the parser's message, each
/// at most 6 bytes once escaped in JSON, and the words around them.
const MAX_ERROR_REPLY: usize = 2048;

fuzz_target!(|data: &[u8]| {
    let Some((&how, rest)) = data.split_first() else {
        return;
    };
    let step = usize::from(how & 0x3f) + 1;
    let sent: Vec<u8> = if how & 0x80 != 0 && !rest.is_empty() {
        rest.iter()
            .copied()
            .cycle()
            .take(MAX_REQUEST + 1 + usize::from(how & 0x40))
            .collect()
    } else {
        rest.to_vec()
    };

    // The server's reader, piece by piece; the end of the data is the client closing.
    let mut line = RequestLine::default();
    let mut framed = Ok(());
    for piece in sent.chunks(step) {
        match line.push(piece) {
            Ok(true) => break,
            Ok(false) => {}
            Err(TooLong) => {
                framed = Err(TooLong);
                break;
            }
        }
        assert!(line.bytes().len() <= MAX_REQUEST);
    }
    assert!(line.bytes().len() <= MAX_REQUEST);

    let at_once = parse_request(&sent);
    match framed {
        Err(TooLong) => assert!(at_once.is_err(), "{} bytes accepted", sent.len()),
        Ok(()) => assert_eq!(Request::parse(&line.text()), at_once),
    }

    match at_once {
        Err(e) => {
            let reply = error_reply(&e);
            assert!(
                reply.len() <= MAX_ERROR_REPLY,
                "a {} byte error reply to {} bytes",
                reply.len(),
                sent.len()
            );
            serde_json::from_str::<serde_json::Value>(&reply).expect("the reply is JSON");
        }
        Ok(request) => {
            let printed = serde_json::to_string(&request).expect("a request prints");
            assert_eq!(Request::parse(&printed), Ok(request.clone()), "{printed}");
            if let Request::Set { options } = &request {
                set(options);
            }
        }
    }
});

/// Runs a `set` on a two-member bond as the daemon's loop does (on a copy it keeps only if the
/// change is accepted).
fn set(options: &[(String, String)]) {
    let mut bond = Bond::new(BondOptions::default(), EthernetAddress([2, 0, 0, 0, 0, 1]));
    for (i, name) in ["eth0", "eth1"].into_iter().enumerate() {
        let info = PortInfo {
            name: name.into(),
            perm_mac: EthernetAddress([2, 0, 0, 0, 1, i as u8]),
            speed_mbps: Some(1000),
            full_duplex: Some(true),
        };
        bond.add_port(Instant::ZERO, info, true);
    }
    let before = bond.options().clone();
    let mut trial = bond.clone();
    match trial.change_options(Instant::from_millis(1), options) {
        Err(_) => assert_eq!(trial.options(), &before, "a refused set changed options"),
        Ok(_) => {
            let printed = trial.options().to_opts();
            let (again, _) = BondOptions::parse_opts(&printed)
                .unwrap_or_else(|e| panic!("{printed:?} (after set {options:?}) fails: {e}"));
            assert_eq!(again.to_opts(), printed);
        }
    }
}
