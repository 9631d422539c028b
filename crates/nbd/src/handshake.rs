//! The fixed-newstyle handshake: greeting and client flags ([`greet`]), then option haggling
//! ([`haggle`]) up to `NBD_OPT_EXPORT_NAME`, a successful `NBD_OPT_GO`, or an acknowledged
//! `NBD_OPT_STARTTLS`, after which the caller runs the TLS handshake and haggles again inside TLS.
//!
//! With TLS required (the protocol's FORCEDTLS mode), every option but `NBD_OPT_STARTTLS` and
//! `NBD_OPT_ABORT` is answered `NBD_REP_ERR_TLS_REQD` until TLS is up, and `NBD_OPT_EXPORT_NAME`,
//! which cannot be answered with an error, ends the connection. Nothing negotiated before
//! `NBD_OPT_STARTTLS` carries over (the protocol forbids it): haggling starts afresh.

use std::io::{self, BufRead, Write};

use crate::client_io::{discard, read_exact_or_eof, read_vec, write_failed, ReadEnd};
use crate::config::Settings;
use crate::outcome::EndReason;
use crate::proto::*;
use crate::tls::TlsMode;

/// Largest option payload read into memory. The longest option this server understands is
/// `NBD_OPT_INFO`/`GO`: a name of at most 4096 bytes plus a list of information requests, so
/// 64 KiB is far more than any honest client sends.
pub const MAX_OPTION_DATA: usize = 64 << 10;

/// What the handshake agreed on.
#[derive(Debug, Clone)]
pub(crate) struct Negotiated {
    pub export_name: String,
    pub structured: bool,
    /// Export size as advertised; requests are checked against this value for the whole
    /// connection, since it is what the client was told.
    pub size: u64,
    pub read_only: bool,
    pub transmission_flags: u16,
}

/// What the greeting settled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Greeted {
    /// The client asked to leave out the zeros after `NBD_OPT_EXPORT_NAME`'s reply.
    pub no_zeroes: bool,
}

/// How option haggling ended, when the connection goes on.
#[derive(Debug)]
pub(crate) enum Haggled {
    /// Transmission starts with what was agreed.
    Go(Negotiated),
    /// `NBD_OPT_STARTTLS` was acknowledged: the TLS handshake comes next, on the same socket.
    StartTls,
}

/// Sends the greeting and reads the client's flags. `Err` carries why the connection must end.
pub(crate) fn greet<R: BufRead, W: Write>(
    stopping: &dyn Fn() -> bool,
    r: &mut R,
    w: &mut W,
) -> Result<Greeted, EndReason> {
    let write_end = |e: io::Error| write_failed(e, stopping());
    let read_end = |e: ReadEnd| e.reason(stopping());

    w.write_all(&encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES)).map_err(write_end)?;
    w.flush().map_err(write_end)?;

    let mut flags = [0u8; 4];
    read_exact_or_eof(r, &mut flags, "client flags").map_err(read_end)?;
    let client_flags = u32::from_be_bytes(flags);
    if client_flags & !KNOWN_CLIENT_FLAGS != 0 {
        return Err(EndReason::ProtocolError(format!(
            "client flags {client_flags:#x} include bits this server does not know ({:#x})",
            client_flags & !KNOWN_CLIENT_FLAGS
        )));
    }
    if client_flags & FLAG_C_FIXED_NEWSTYLE == 0 {
        return Err(EndReason::ProtocolError(
            "client did not set NBD_FLAG_C_FIXED_NEWSTYLE; the old (non-fixed) newstyle handshake is not supported"
                .into(),
        ));
    }
    Ok(Greeted { no_zeroes: client_flags & FLAG_C_NO_ZEROES != 0 })
}

/// Haggles over options until transmission or `NBD_OPT_STARTTLS`; `tls_active` says whether
/// this connection already runs inside TLS. `Err` carries why the connection must end.
pub(crate) fn haggle<R: BufRead, W: Write>(
    server: &Settings,
    stopping: &dyn Fn() -> bool,
    greeted: Greeted,
    tls_active: bool,
    r: &mut R,
    w: &mut W,
) -> Result<Haggled, EndReason> {
    let write_end = |e: io::Error| write_failed(e, stopping());
    let no_zeroes = greeted.no_zeroes;
    let mut structured = false;
    let tls_required = !tls_active && server.config.tls.as_ref().is_some_and(|t| t.mode() == TlsMode::Require);
    // Set once the client has been told TLS is required, so a client that then leaves is
    // logged as refused rather than as an ordinary disconnection.
    let mut told_tls_required = false;
    let read_end = |e: ReadEnd, told: bool| match e {
        ReadEnd::Closed if told && !stopping() => {
            EndReason::Refused("this server requires TLS, and the client left without sending NBD_OPT_STARTTLS".into())
        }
        e => e.reason(stopping()),
    };

    loop {
        w.flush().map_err(write_end)?;
        let mut raw = [0u8; OPTION_HEADER_LEN];
        read_exact_or_eof(r, &mut raw, "an option header").map_err(|e| read_end(e, told_tls_required))?;
        let header = OptionHeader::decode(&raw).map_err(|e| EndReason::ProtocolError(e.to_string()))?;
        let option = header.option;
        let mut reply = |reply_type: u32, data: &[u8]| -> Result<(), EndReason> {
            let h = OptionReplyHeader { option, reply_type, len: data.len() as u32 };
            w.write_all(&h.encode()).and_then(|()| w.write_all(data)).map_err(write_end)
        };

        if header.len as usize > MAX_OPTION_DATA {
            // Skipping the data keeps the stream in step, so the client can go on with other
            // options; nothing is buffered, so the length costs the server nothing but time.
            discard(r, header.len.into(), "option data").map_err(|e| read_end(e, told_tls_required))?;
            if option == OPT_EXPORT_NAME {
                return Err(EndReason::Refused(format!(
                    "NBD_OPT_EXPORT_NAME with a {}-byte name cannot name the export",
                    header.len
                )));
            }
            if tls_required && option != OPT_STARTTLS && option != OPT_ABORT {
                // Before TLS every option but these two is refused the same way, whatever its size.
                told_tls_required = true;
                reply(REP_ERR_TLS_REQD, tls_required_message(option).as_bytes())?;
                continue;
            }
            let msg = format!(
                "{} data of {} bytes exceeds the {MAX_OPTION_DATA}-byte limit",
                option_name(option),
                header.len
            );
            reply(REP_ERR_TOO_BIG, msg.as_bytes())?;
            continue;
        }
        let data = read_vec(r, header.len as usize, "option data").map_err(|e| read_end(e, told_tls_required))?;

        if stopping() && option != OPT_ABORT {
            if option == OPT_EXPORT_NAME {
                // This option has no error reply; closing is the only answer.
                return Err(EndReason::ServerStop);
            }
            reply(REP_ERR_SHUTDOWN, b"the server is shutting down")?;
            continue;
        }

        if tls_required && option != OPT_STARTTLS && option != OPT_ABORT {
            if option == OPT_EXPORT_NAME {
                // This option has no error reply; closing is the only answer.
                return Err(EndReason::Refused("NBD_OPT_EXPORT_NAME without TLS, which this server requires".into()));
            }
            told_tls_required = true;
            reply(REP_ERR_TLS_REQD, tls_required_message(option).as_bytes())?;
            continue;
        }

        match option {
            OPT_EXPORT_NAME => {
                if !names_this_export(server, &data) {
                    return Err(EndReason::Refused(format!(
                        "NBD_OPT_EXPORT_NAME asked for unknown export {:?}",
                        String::from_utf8_lossy(&data)
                    )));
                }
                let negotiated = negotiate(server, structured);
                w.write_all(&export_name_reply(negotiated.size, negotiated.transmission_flags, no_zeroes))
                    .and_then(|()| w.flush())
                    .map_err(write_end)?;
                return Ok(Haggled::Go(negotiated));
            }
            OPT_ABORT => {
                // The client may already have closed without waiting for the ACK the spec
                // requires us to send, so a failure to send it is not worth reporting.
                let _ = reply(REP_ACK, &[]);
                let _ = w.flush();
                if told_tls_required {
                    return Err(EndReason::Refused(
                        "this server requires TLS, and the client gave up (NBD_OPT_ABORT) without NBD_OPT_STARTTLS"
                            .into(),
                    ));
                }
                return Err(EndReason::Aborted);
            }
            OPT_LIST => {
                if !data.is_empty() {
                    reply(REP_ERR_INVALID, b"NBD_OPT_LIST takes no data")?;
                } else {
                    reply(REP_SERVER, &rep_server(&server.config.export_name, server.config.description.as_deref()))?;
                    reply(REP_ACK, &[])?;
                }
            }
            OPT_STARTTLS => {
                if !data.is_empty() {
                    reply(REP_ERR_INVALID, b"NBD_OPT_STARTTLS takes no data")?;
                } else if tls_active {
                    reply(REP_ERR_INVALID, b"TLS is already in use on this connection")?;
                } else if server.config.tls.is_none() {
                    reply(REP_ERR_UNSUP, b"TLS is not enabled on this server")?;
                } else {
                    reply(REP_ACK, &[])?;
                    w.flush().map_err(write_end)?;
                    return Ok(Haggled::StartTls);
                }
            }
            OPT_INFO | OPT_GO => {
                let request = match InfoRequest::decode(&data) {
                    Ok(request) => request,
                    Err(e) => {
                        reply(REP_ERR_INVALID, format!("malformed {}: {e}", option_name(option)).as_bytes())?;
                        continue;
                    }
                };
                if !names_this_export(server, &request.name) {
                    let msg = format!("no export named {:?}", String::from_utf8_lossy(&request.name));
                    reply(REP_ERR_UNKNOWN, msg.as_bytes())?;
                    continue;
                }
                let negotiated = negotiate(server, structured);
                reply(REP_INFO, &info_export(negotiated.size, negotiated.transmission_flags))?;
                if request.requests.contains(&INFO_NAME) {
                    reply(REP_INFO, &info_string(INFO_NAME, &server.config.export_name))?;
                }
                if let (true, Some(d)) = (request.requests.contains(&INFO_DESCRIPTION), &server.config.description) {
                    reply(REP_INFO, &info_string(INFO_DESCRIPTION, d))?;
                }
                // Sent whether asked for or not: the spec lets a server volunteer information,
                // and a client that ignores it loses nothing since the minimum is 1.
                reply(REP_INFO, &info_block_size(1, server.preferred_block_size(), server.config.max_payload))?;
                reply(REP_ACK, &[])?;
                if option == OPT_GO {
                    w.flush().map_err(write_end)?;
                    return Ok(Haggled::Go(negotiated));
                }
            }
            OPT_STRUCTURED_REPLY => {
                if !data.is_empty() {
                    reply(REP_ERR_INVALID, b"NBD_OPT_STRUCTURED_REPLY takes no data")?;
                } else {
                    // Asking twice is harmless, so it is acknowledged again rather than refused.
                    structured = true;
                    reply(REP_ACK, &[])?;
                }
            }
            other => {
                let msg = format!("{} is not supported by this server", option_name(other));
                reply(REP_ERR_UNSUP, msg.as_bytes())?;
            }
        }
    }
}

/// The message of `NBD_REP_ERR_TLS_REQD`: what was refused and what to do.
fn tls_required_message(option: u32) -> String {
    format!(
        "{} refused: this server requires TLS (send NBD_OPT_STARTTLS first; with libnbd, use an nbds:// URI)",
        option_name(option)
    )
}

/// The configured name, or "" which the spec reserves for the default export.
fn names_this_export(server: &Settings, name: &[u8]) -> bool {
    name.is_empty() || name == server.config.export_name.as_bytes()
}

fn negotiate(server: &Settings, structured: bool) -> Negotiated {
    let export = &server.export;
    let read_only = export.read_only();
    let mut flags = FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_CACHE;
    if read_only {
        // Trim and write-zeroes would only ever fail with EPERM, so they are not offered.
        flags |= FLAG_READ_ONLY;
    } else {
        flags |= FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES;
    }
    if structured {
        // Every read is answered with a single data chunk, so "don't fragment" costs nothing;
        // the spec forbids the flag without structured replies.
        flags |= FLAG_SEND_DF;
    }
    if export.multi_conn_safe() {
        flags |= FLAG_CAN_MULTI_CONN;
    }
    Negotiated {
        export_name: server.config.export_name.clone(),
        structured,
        size: export.size(),
        read_only,
        transmission_flags: flags,
    }
}
