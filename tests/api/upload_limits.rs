//! Uploads that cannot exhaust memory (issue 23). A few megabytes of DOCX or PDF can inflate
//! to gigabytes: such files are refused with 422 and the reason, nothing of them is kept, and
//! the platform neither swells nor stops answering while it refuses them.

use std::io::{Cursor, Read, Write};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_knowledgebase::sources::bounded::{
    self, MAX_DOCX_MEMBER_BYTES, MAX_DOCX_TOTAL_BYTES, MAX_PDF_STREAM_BYTES,
};

use crate::agents::id;
use crate::common::multipart::{self, Part};
use crate::common::{Api, Response, Stack};
use crate::knowledgebase::create_knowledgebase;

const ENV: &[(&str, &str)] = &[
    ("SWITCHBOARD_RATE_LIMIT_WRITE", "100000"),
    ("SWITCHBOARD_RATE_LIMIT_STANDARD", "100000"),
    ("SWITCHBOARD_RATE_LIMIT_SEARCH", "100000"),
];

/// The most `switchboard dev` may ever hold resident while it refuses the bombs (it idles at
/// about 220 MB; before the caps, one DOCX bomb took it past 2 GB).
const MAX_PEAK_RESIDENT: u64 = 500 * 1024 * 1024;
/// What the DOCX bombs' `word/document.xml` and the PDF bomb's content stream inflate to.
const DOCX_BODY: u64 = 1 << 30;
const PDF_STREAM: u64 = 500 << 20;

/// `unit` repeated to `len` bytes.
fn repeated(unit: &str, len: usize) -> Vec<u8> {
    unit.bytes().cycle().take(len).collect()
}

/// Writes `head`, then `unit` repeated for about `total` bytes (a whole number of times), then
/// `tail`, a block at a time: nothing here ever holds what the bombs inflate to.
fn write_repeated(out: &mut impl Write, head: &[u8], unit: &str, total: u64, tail: &[u8]) -> u64 {
    let block = repeated(unit, (64 * 1024 / unit.len()) * unit.len());
    out.write_all(head).unwrap();
    let mut written = 0u64;
    while written + block.len() as u64 <= total {
        out.write_all(&block).unwrap();
        written += block.len() as u64;
    }
    out.write_all(tail).unwrap();
    head.len() as u64 + written + tail.len() as u64
}

fn deflated() -> zip::write::SimpleFileOptions {
    zip::write::SimpleFileOptions::default().compression_level(Some(9))
}

/// A DOCX whose `word/document.xml` is `unit` repeated to about 1 GiB; and its size.
fn docx_bomb(unit: &str) -> (Vec<u8>, u64) {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file("[Content_Types].xml", deflated()).unwrap();
    zip.write_all(
        br#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>"#,
    )
    .unwrap();
    zip.start_file("word/document.xml", deflated()).unwrap();
    let head = br#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>"#;
    let size = write_repeated(&mut zip, head, unit, DOCX_BODY, b"</w:body></w:document>");
    (zip.finish().unwrap().into_inner(), size)
}

/// Rewrites the uncompressed size `member` declares, in its local header and in the central
/// directory, as a crafted archive would.
fn declare_size(archive: &mut [u8], member: &str, declared: u32) {
    let mut patched = 0;
    for at in 0..archive.len().saturating_sub(46) {
        let (name_at, size_at, name_len_at) = match &archive[at..at + 4] {
            b"PK\x03\x04" => (at + 30, at + 22, at + 26),
            b"PK\x01\x02" => (at + 46, at + 24, at + 28),
            _ => continue,
        };
        let name_len = usize::from(u16::from_le_bytes([archive[name_len_at], archive[name_len_at + 1]]));
        if archive.get(name_at..name_at + name_len) == Some(member.as_bytes()) {
            archive[size_at..size_at + 4].copy_from_slice(&declared.to_le_bytes());
            patched += 1;
        }
    }
    assert_eq!(patched, 2, "a local header and a central directory entry name {member}");
}

/// A zlib stream of `head` and `unit` repeated to about `total` bytes: deflated by the zip
/// writer, with a zlib header and the Adler-32 of the data, computed a block at a time.
fn zlib_bomb(head: &[u8], unit: &str, total: u64) -> Vec<u8> {
    const MOD: u64 = 65521;
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file("stream", deflated()).unwrap();
    write_repeated(&mut zip, head, unit, total, b"");
    let mut archive = zip::ZipArchive::new(Cursor::new(zip.finish().unwrap().into_inner())).unwrap();
    let mut raw = Vec::new();
    archive.by_index_raw(0).unwrap().read_to_end(&mut raw).unwrap();

    let (mut a, mut b) = (1u64, 0u64);
    for &c in head {
        a = (a + u64::from(c)) % MOD;
        b = (b + a) % MOD;
    }
    // Over a block of length L: a' = a + sum, b' = b + L * a + sum of (L - i) * byte i.
    let block = repeated(unit, (64 * 1024 / unit.len()) * unit.len());
    let len = block.len() as u64;
    let sum = block.iter().map(|&c| u64::from(c)).sum::<u64>() % MOD;
    let weighted = block.iter().enumerate().map(|(i, &c)| (len - i as u64) * u64::from(c) % MOD).sum::<u64>() % MOD;
    let mut written = 0u64;
    while written + len <= total {
        b = (b + len % MOD * a + weighted) % MOD;
        a = (a + sum) % MOD;
        written += len;
    }
    let mut zlib = vec![0x78, 0xDA];
    zlib.extend_from_slice(&raw);
    zlib.extend_from_slice(&u32::try_from(b << 16 | a).unwrap().to_be_bytes());
    zlib
}

/// A one-page PDF whose content stream (FlateDecode) inflates to about 500 MiB: a line of
/// text, then blank lines.
fn pdf_bomb() -> Vec<u8> {
    let blank_line = format!("{}\n", " ".repeat(63));
    let stream = zlib_bomb(b"BT /F1 12 Tf 72 720 Td (A page without end.) Tj ET\n", &blank_line, PDF_STREAM);
    let objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
          /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_vec(),
        [format!("<< /Length {} /Filter /FlateDecode >>\nstream\n", stream.len()).as_bytes(), &stream, b"\nendstream"]
            .concat(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", index + 1).as_bytes());
        out.extend_from_slice(object);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).as_bytes(),
    );
    out
}

struct Bomb {
    file_name: &'static str,
    bytes: Vec<u8>,
    /// The reason the upload is refused with.
    hint: String,
}

/// Two DOCX bombs (one declaring its 1 GiB body, one claiming 10 kB for it) and a PDF bomb,
/// uploaded twice: four at once.
fn bombs() -> Vec<Bomb> {
    let (honest, body) = docx_bomb("<w:p><w:r><w:t>All work and no play makes Jack a dull boy.</w:t></w:r></w:p>");
    // Markup without text, so that what stops it is the inflated size, not the text's.
    let (mut lying, _) = docx_bomb("<w:p><w:pPr><w:jc w:val=\"left\"/></w:pPr><w:r><w:rPr><w:b/></w:rPr></w:r></w:p>");
    declare_size(&mut lying, "word/document.xml", 10_000);
    let pdf = pdf_bomb();
    let pdf_hint = format!(
        "a stream of the PDF decodes to more than {} (the limit per stream)",
        bounded::size(MAX_PDF_STREAM_BYTES)
    );
    vec![
        Bomb {
            file_name: "report.docx",
            bytes: honest,
            hint: format!(
                "the DOCX member word/document.xml declares {} uncompressed, over the limit of {} per member",
                bounded::size(body),
                bounded::size(MAX_DOCX_MEMBER_BYTES)
            ),
        },
        Bomb {
            file_name: "letter.docx",
            bytes: lying,
            hint: format!(
                "the DOCX body (word/document.xml) inflates to more than {} (the limit)",
                bounded::size(MAX_DOCX_MEMBER_BYTES.min(MAX_DOCX_TOTAL_BYTES))
            ),
        },
        Bomb { file_name: "manual.pdf", bytes: pdf.clone(), hint: pdf_hint.clone() },
        Bomb { file_name: "guide.pdf", bytes: pdf, hint: pdf_hint },
    ]
}

async fn upload(api: &Api, base: &str, file_name: &str, content: &[u8]) -> Response {
    let (content_type, body) = multipart::form(&[Part::file("file", file_name, content)]);
    api.raw("POST", &format!("{base}/documents"), Some(&content_type), body).await
}

/// The most memory the process has held resident so far (VmHWM).
fn peak_resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process's status");
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).expect("VmHWM in the status");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("VmHWM in kB");
    kib * 1024
}

/// Files in the stack's object storage.
fn stored_files(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries.map(|entry| entry.unwrap().path()).map(|path| if path.is_dir() { stored_files(&path) } else { 1 }).sum()
}

async fn ready(api: &Api, path: &str) -> Value {
    let wait = async {
        loop {
            let document = api.get(path).await.expect(200)["data"].clone();
            if document["isUpdating"] == false {
                return document;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .unwrap_or_else(|_| panic!("{path} kept updating for 60 s"))
}

#[tokio::test]
async fn documents_inflating_past_the_caps_are_refused_while_the_platform_stays_small_and_answers() {
    let building = tokio::task::spawn_blocking(bombs);
    let stack = Stack::start_with(ENV).await;
    let team = stack.team("Acme", false, 10).await;
    let api = stack.client(&team.key);
    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Bombs").await));
    let fine_base = format!("/knowledgebase/{}", id(&create_knowledgebase(&api, "Fine").await));
    let bombs = tokio::time::timeout(Duration::from_secs(120), building)
        .await
        .expect("the bombs were not built in 120 s")
        .expect("building the bombs");
    let pid = stack.process.child.id().expect("the platform's pid");
    let idle_peak = peak_resident(pid);

    // The four at once, each timed.
    let started = Instant::now();
    let uploads: Vec<_> = bombs
        .iter()
        .map(|bomb| {
            let (api, base, file_name, bytes) = (api.clone(), base.clone(), bomb.file_name, bomb.bytes.clone());
            tokio::spawn(async move {
                let start = Instant::now();
                let response = upload(&api, &base, file_name, &bytes).await;
                (response, start.elapsed())
            })
        })
        .collect();
    // Meanwhile the platform keeps answering: who am I, and a small readable upload.
    let mut slowest = Duration::ZERO;
    let mut answered = 0;
    let mut fine = Value::Null;
    while answered < 5 || uploads.iter().any(|upload| !upload.is_finished()) {
        assert!(started.elapsed() < Duration::from_secs(60), "the bombs were not refused in 60 s");
        let asked = Instant::now();
        api.get("/me").await.expect(200);
        slowest = slowest.max(asked.elapsed());
        answered += 1;
        if fine.is_null() {
            let text = b"The lighthouse keeper's logbook is kept in the harbour archive.";
            fine = upload(&api, &fine_base, "logbook.txt", text).await.expect(201)["data"].clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(slowest < Duration::from_secs(2), "GET /v1/me took {slowest:?} while the bombs were refused");

    for (bomb, upload) in bombs.iter().zip(uploads) {
        let (response, took) = tokio::time::timeout(Duration::from_secs(5), upload)
            .await
            .expect("a finished upload answers")
            .expect("the upload task");
        eprintln!("{} ({} bytes): {} in {took:?}", bomb.file_name, bomb.bytes.len(), response.status);
        assert_eq!(response.error_code(422), "UNPROCESSABLE_ENTITY", "{}", bomb.file_name);
        assert_eq!(response.body["error"], "The file cannot be read");
        assert_eq!(response.body["hint"], bomb.hint.as_str(), "{}", bomb.file_name);
        assert!(took < Duration::from_secs(9), "{} took {took:?}, near the gateway's deadline", bomb.file_name);
    }

    // Nothing of the bombs is kept; the readable file is, and is extracted.
    let kept = api.get(&base).await.expect(200)["data"]["documents"].clone();
    assert_eq!(kept, json!([]), "no document row for a refused file");
    let fine = ready(&api, &format!("{fine_base}/documents/{}", id(&fine))).await;
    assert_eq!(fine["status"], "ready", "{fine}");
    if stack.is_dev() {
        assert_eq!(stored_files(&stack.data_path().join("objects")), 1, "only the readable file is stored");
        let peak = peak_resident(pid);
        eprintln!("peak resident: {} MiB idle, {} MiB after the bombs", idle_peak >> 20, peak >> 20);
        assert!(peak < MAX_PEAK_RESIDENT, "switchboard dev peaked at {} MiB", peak >> 20);
    }
}
