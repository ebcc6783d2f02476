//! Uploaded documents into text sections. Formats are known by the file's extension; a file
//! that is not what its extension says, holds no text, or would grow past one of the caps of
//! [`bounded`] while it is read, is refused with the reason.

use std::io::{BufReader, Cursor};

use super::bounded::{self, Capped, Limits};
use super::html::{self, Section};
use super::pdf;
use super::qa::{self, QaPair};

pub const SUPPORTED: &str = ".txt, .md, .html, .pdf, .docx, .csv";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Html,
    Pdf,
    Docx,
    Csv,
}

impl Format {
    pub fn from_file_name(name: &str) -> Option<Format> {
        let extension = name.rsplit_once('.')?.1.to_ascii_lowercase();
        Some(match extension.as_str() {
            "txt" | "text" => Format::Text,
            "md" | "markdown" => Format::Markdown,
            "html" | "htm" => Format::Html,
            "pdf" => Format::Pdf,
            "docx" => Format::Docx,
            "csv" => Format::Csv,
            _ => return None,
        })
    }

    /// The format a Content-Type names (`text/plain; charset=utf-8` is text), for a file whose
    /// name does not say.
    pub fn from_content_type(content_type: &str) -> Option<Format> {
        let media = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        let named = |format: Format| format.content_type() == media;
        [Format::Text, Format::Markdown, Format::Html, Format::Pdf, Format::Docx, Format::Csv]
            .into_iter()
            .find(|format| named(*format))
            .or_else(|| (media == "text/x-markdown").then_some(Format::Markdown))
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain",
            Format::Markdown => "text/markdown",
            Format::Html => "text/html",
            Format::Pdf => "application/pdf",
            Format::Docx => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            Format::Csv => "text/csv",
        }
    }
}

/// What a document holds: sections to turn into entries, or (a CSV with question and
/// answer columns) the entries themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub title: Option<String>,
    pub sections: Vec<Section>,
    pub pairs: Vec<QaPair>,
}

impl Parsed {
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty() && self.sections.iter().all(|s| s.text.trim().is_empty())
    }

    /// The Q&A entries of the document, named `source_name` where it has no headings.
    pub fn into_pairs(self, source_name: &str) -> Vec<QaPair> {
        let mut pairs = self.pairs;
        pairs.extend(qa::from_sections(self.title.as_deref(), source_name, &self.sections));
        pairs.truncate(qa::MAX_ENTRIES);
        pairs
    }
}

fn utf8(bytes: &[u8]) -> Result<&str, String> {
    let bytes = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text".to_owned())
}

/// Parses a document; `Err` carries a reason fit for the client. PDF parsing is done on
/// the caller's blocking thread and may take a while for large files.
pub fn parse(format: Format, bytes: &[u8]) -> Result<Parsed, String> {
    parse_within(format, bytes, &Limits::DEFAULT)
}

/// [`parse`] within other caps than the service's.
pub fn parse_within(format: Format, bytes: &[u8], limits: &Limits) -> Result<Parsed, String> {
    let parsed = match format {
        Format::Text => Parsed { sections: qa::plain_text_sections(utf8(bytes)?), ..Parsed::default() },
        Format::Markdown => Parsed { sections: qa::markdown_sections(utf8(bytes)?), ..Parsed::default() },
        Format::Html => {
            let page = html::extract(utf8(bytes)?);
            Parsed { title: page.title, sections: page.sections, pairs: Vec::new() }
        }
        Format::Csv => parse_csv(bytes)?,
        // pdf-extract panics on some malformed files (its font and encoding code indexes
        // without checking): such a file is the client's to fix, a 422, not a 500 that also
        // aborted the extraction job.
        Format::Pdf => std::panic::catch_unwind(|| parse_pdf(bytes, limits))
            .map_err(|_| "the PDF cannot be read: its structure is malformed".to_owned())??,
        Format::Docx => parse_docx(bytes, limits)?,
    };
    if parsed.is_empty() {
        return Err("the document contains no text".to_owned());
    }
    Ok(parsed)
}

/// A CSV with `question` and `answer` columns gives its rows as entries; any other CSV
/// gives one section per row, headed by its first cell, with `column: value` lines.
fn parse_csv(bytes: &[u8]) -> Result<Parsed, String> {
    let text = utf8(bytes)?;
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(text.as_bytes());
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| format!("the CSV header cannot be read: {e}"))?
        .iter()
        .map(|h| h.trim().to_owned())
        .collect();
    let column = |name: &str| headers.iter().position(|h| h.eq_ignore_ascii_case(name));
    let mut parsed = Parsed::default();
    for (number, record) in reader.records().enumerate() {
        let record = record.map_err(|e| format!("row {} of the CSV cannot be read: {e}", number + 2))?;
        if let (Some(q), Some(a)) = (column("question"), column("answer")) {
            let (question, answer) =
                (record.get(q).unwrap_or_default().trim(), record.get(a).unwrap_or_default().trim());
            if !question.is_empty() && !answer.is_empty() {
                parsed.pairs.push(QaPair { question: question.to_owned(), answer: answer.to_owned() });
            }
            continue;
        }
        let cells: Vec<(&str, &str)> = headers
            .iter()
            .map(String::as_str)
            .zip(record.iter())
            .map(|(h, v)| (h, v.trim()))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let Some((_, first)) = cells.first() else {
            continue;
        };
        let text = cells.iter().map(|(h, v)| format!("{h}: {v}")).collect::<Vec<_>>().join("\n");
        parsed.sections.push(Section { heading: Some((*first).to_owned()), text });
    }
    Ok(parsed)
}

/// Sections by headings, as a webpage is cut (issue 55: a handbook of 4 headed sections was
/// one "Page 1" entry, returned whole for every match): a short line in a font clearly larger
/// than the body's opens a section, whatever page it is on. A PDF without such lines is cut
/// by page, so that entries still say where they come from.
fn parse_pdf(bytes: &[u8], limits: &Limits) -> Result<Parsed, String> {
    let pages = pdf::read_lines(bytes, limits)?;
    let body = body_size(pages.iter().flatten());
    let is_heading = |line: &pdf::Line| {
        let text = line.text.trim();
        line.size >= body * HEADING_SCALE
            && text.chars().count() <= HEADING_CHARS
            && text.chars().any(char::is_alphabetic)
    };
    if body > 0.0 && pages.iter().flatten().any(is_heading) {
        let mut sections: Vec<Section> = Vec::new();
        let mut current = Section { heading: None, text: String::new() };
        // The size of the heading line just read, if the last line was one.
        let mut last_heading: Option<f64> = None;
        for line in pages.iter().flatten() {
            let text = line.text.trim();
            if text.is_empty() {
                continue;
            }
            if is_heading(line) {
                // A heading that wraps onto a second line (in the same size) is one heading.
                let wraps = last_heading.is_some_and(|size| (size - line.size).abs() < 0.5);
                if wraps && current.text.is_empty() {
                    let heading = current.heading.get_or_insert_with(String::new);
                    heading.push(' ');
                    heading.push_str(text);
                } else {
                    sections.push(std::mem::replace(
                        &mut current,
                        Section { heading: Some(text.to_owned()), text: String::new() },
                    ));
                }
                last_heading = Some(line.size);
                continue;
            }
            last_heading = None;
            if !current.text.is_empty() {
                current.text.push('\n');
            }
            current.text.push_str(text);
        }
        sections.push(current);
        sections.retain(|section| !section.text.is_empty());
        return Ok(Parsed { sections, ..Parsed::default() });
    }
    let sections = pages
        .into_iter()
        .enumerate()
        .map(|(index, lines)| {
            let text = lines.iter().map(|l| l.text.trim()).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n");
            Section { heading: Some(format!("Page {}", index + 1)), text }
        })
        .filter(|section| !section.text.is_empty())
        .collect();
    Ok(Parsed { sections, ..Parsed::default() })
}

/// How much larger than the body's a font is for its line to be a heading: 15 %, a step a
/// reader sees (a 12 pt body's headings are 14 pt and up).
const HEADING_SCALE: f64 = 1.15;

/// The longest line taken for a heading: longer ones are large body text (a quote, a note).
const HEADING_CHARS: usize = 120;

/// The body's font size: the size most of the characters are drawn in (to the half point).
fn body_size<'a>(lines: impl Iterator<Item = &'a pdf::Line>) -> f64 {
    let mut chars_by_size: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
    for line in lines {
        let halves = (line.size * 2.0).round() as i64;
        *chars_by_size.entry(halves).or_default() += line.text.chars().filter(|c| !c.is_whitespace()).count();
    }
    chars_by_size
        .into_iter()
        .max_by_key(|(halves, chars)| (*chars, -halves))
        .map_or(0.0, |(halves, _)| halves as f64 / 2.0)
}

/// A paragraph set in bold alone, short and without a final full stop, is a heading too: many
/// documents mark their headings so rather than with a heading style.
fn bold_heading(text: &str, runs: usize, bold_runs: usize) -> bool {
    runs > 0
        && bold_runs == runs
        && text.chars().count() <= HEADING_CHARS
        && !text.ends_with('.')
        && text.chars().any(char::is_alphabetic)
}

/// `word/document.xml`: paragraphs in `Heading…` or `Title` styles open sections, and so do
/// short paragraphs set in bold alone (see [`bold_heading`]). The
/// archive's declared sizes are checked before anything is inflated, and the body is parsed
/// as it inflates, counted, so that neither a lying archive nor a large body is ever held.
fn parse_docx(bytes: &[u8], limits: &Limits) -> Result<Parsed, String> {
    use quick_xml::events::Event;

    let mut archive =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| format!("the DOCX is not a valid archive: {e}"))?;
    bounded::check_declared_sizes(&mut archive, "the DOCX", limits)?;
    let body = archive.by_name("word/document.xml").map_err(|_| "the DOCX has no word/document.xml".to_owned())?;
    let cap = limits.docx_member_bytes.min(limits.docx_total_bytes);
    let reason = format!("the DOCX body (word/document.xml) inflates to more than {} (the limit)", bounded::size(cap));
    let mut reader = quick_xml::Reader::from_reader(BufReader::new(Capped::new(body, cap, reason)));
    let mut buffer = Vec::new();
    let mut text_bytes = 0usize;
    let text_cap = usize::try_from(limits.text_bytes).unwrap_or(usize::MAX);
    let mut sections: Vec<Section> = Vec::new();
    let mut current = Section { heading: None, text: String::new() };
    let mut paragraph = String::new();
    let mut heading_style = false;
    let mut in_text = false;
    // Runs of the paragraph with text, and those of them in bold (`w:b` in the run's
    // properties, unless `w:val` turns it off).
    let (mut runs, mut bold_runs, mut run_bold, mut run_has_text, mut in_run_properties) = (0, 0, false, false, false);
    loop {
        if text_bytes > text_cap {
            return Err(format!(
                "the text of the document is longer than {} (the limit)",
                bounded::size(limits.text_bytes)
            ));
        }
        buffer.clear();
        let event = match reader.read_event_into(&mut buffer) {
            Ok(event) => event,
            Err(error) => {
                return Err(match (reader.get_ref().get_ref().exceeded(), &error) {
                    (Some(reason), _) => reason.to_owned(),
                    (None, quick_xml::Error::Io(io)) => format!("the DOCX body cannot be read: {io}"),
                    (None, _) => format!("the DOCX body is not valid XML: {error}"),
                });
            }
        };
        match event {
            Event::Start(element) | Event::Empty(element) => match element.name().as_ref() {
                b"w:p" => {
                    paragraph.clear();
                    heading_style = false;
                    (runs, bold_runs) = (0, 0);
                }
                b"w:r" => (run_bold, run_has_text) = (false, false),
                b"w:rPr" => in_run_properties = true,
                b"w:b" if in_run_properties => {
                    let value = element.try_get_attribute("w:val").ok().flatten().map(|a| a.value.into_owned());
                    run_bold = !matches!(value.as_deref(), Some(b"0" | b"false" | b"off"));
                }
                b"w:pStyle" => {
                    let style = element
                        .try_get_attribute("w:val")
                        .ok()
                        .flatten()
                        .map(|a| String::from_utf8_lossy(&a.value).to_ascii_lowercase())
                        .unwrap_or_default();
                    heading_style = style.starts_with("heading") || style == "title";
                }
                b"w:t" => in_text = true,
                b"w:tab" => {
                    paragraph.push(' ');
                    text_bytes += 1;
                }
                b"w:br" => {
                    paragraph.push('\n');
                    text_bytes += 1;
                }
                _ => {}
            },
            Event::Text(text) if in_text => {
                let text = text.decode().map_err(|e| format!("the DOCX text cannot be decoded: {e}"))?;
                text_bytes += text.len();
                run_has_text |= !text.trim().is_empty();
                paragraph.push_str(&text);
            }
            Event::End(element) => match element.name().as_ref() {
                b"w:t" => in_text = false,
                b"w:rPr" => in_run_properties = false,
                b"w:r" if run_has_text => {
                    runs += 1;
                    bold_runs += usize::from(run_bold);
                }
                b"w:p" => {
                    let text = paragraph.trim().to_owned();
                    if text.is_empty() {
                        continue;
                    }
                    if heading_style || bold_heading(&text, runs, bold_runs) {
                        if !current.text.is_empty() || current.heading.is_some() {
                            sections
                                .push(std::mem::replace(&mut current, Section { heading: None, text: String::new() }));
                        }
                        current.heading = Some(text);
                    } else {
                        if !current.text.is_empty() {
                            current.text.push('\n');
                        }
                        current.text.push_str(&text);
                    }
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    sections.push(current);
    sections.retain(|s| !s.text.is_empty());
    Ok(Parsed { sections, ..Parsed::default() })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    const SMALL: Limits = bounded::SMALL;

    /// A DOCX of `members` (name, content), deflated.
    fn docx(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, content) in members {
            zip.start_file(*name, zip::write::SimpleFileOptions::default()).unwrap();
            zip.write_all(content).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    fn body(paragraphs: &str) -> Vec<u8> {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{paragraphs}</w:body></w:document>"#
        )
        .into_bytes()
    }

    /// Rewrites the uncompressed size `member` declares, in its local header and in the
    /// central directory, as a crafted archive would.
    fn declare_size(archive: &mut [u8], member: &str, declared: u32) {
        let mut patched = 0;
        for at in 0..archive.len().saturating_sub(46) {
            let (name_at, size_at) = match &archive[at..at + 4] {
                b"PK\x03\x04" => (at + 30, at + 22),
                b"PK\x01\x02" => (at + 46, at + 24),
                _ => continue,
            };
            let offset = if archive[at + 2] == 3 { 26 } else { 28 };
            let name_len = usize::from(u16::from_le_bytes([archive[at + offset], archive[at + offset + 1]]));
            if archive.get(name_at..name_at + name_len) == Some(member.as_bytes()) {
                archive[size_at..size_at + 4].copy_from_slice(&declared.to_le_bytes());
                patched += 1;
            }
        }
        assert_eq!(patched, 2, "a local header and a central directory entry");
    }

    #[test]
    fn docx_headings_open_sections() {
        let paragraphs = r#"<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Returns</w:t></w:r></w:p><w:p><w:r><w:t>Within 30 days.</w:t></w:r></w:p>"#;
        let parsed = parse(Format::Docx, &docx(&[("word/document.xml", &body(paragraphs))])).unwrap();
        assert_eq!(parsed.sections, [Section { heading: Some("Returns".into()), text: "Within 30 days.".into() }]);
    }

    #[test]
    fn docx_paragraphs_in_bold_alone_open_sections_and_bold_words_in_a_sentence_do_not() {
        let paragraphs = concat!(
            r#"<w:p><w:r><w:rPr><w:b/></w:rPr><w:t>Deliveries</w:t></w:r></w:p>"#,
            r#"<w:p><w:r><w:t>Orders ship </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>the next day</w:t></w:r></w:p>"#,
            r#"<w:p><w:r><w:rPr><w:b/></w:rPr><w:t>Every order is insured.</w:t></w:r></w:p>"#,
            r#"<w:p><w:r><w:rPr><w:b w:val="0"/></w:rPr><w:t>Returns</w:t></w:r></w:p>"#,
        );
        let parsed = parse(Format::Docx, &docx(&[("word/document.xml", &body(paragraphs))])).unwrap();
        let text = "Orders ship the next day\nEvery order is insured.\nReturns";
        assert_eq!(parsed.sections, [Section { heading: Some("Deliveries".into()), text: text.into() }]);
    }

    #[test]
    fn the_body_size_is_the_size_of_most_characters() {
        let line = |text: &str, size: f64| pdf::Line { text: text.to_owned(), size };
        let lines = [line("Handbook", 20.0), line("a long line of body text", 11.0), line("more body", 11.2)];
        assert_eq!(body_size(lines.iter()), 11.0);
    }

    #[test]
    fn a_docx_member_declaring_a_small_size_but_inflating_past_the_cap_is_refused() {
        let filler = "<w:p><w:r><w:rPr><w:b/></w:rPr></w:r></w:p>".repeat(3000);
        let mut archive = docx(&[("word/document.xml", &body(&filler))]);
        declare_size(&mut archive, "word/document.xml", 1000);
        assert_eq!(
            parse_within(Format::Docx, &archive, &SMALL).unwrap_err(),
            "the DOCX body (word/document.xml) inflates to more than 64 KiB (the limit)"
        );
    }

    #[test]
    fn docx_declared_sizes_are_checked_before_anything_is_inflated() {
        let big = vec![b' '; 65 * 1024 + 1];
        let archive = docx(&[("word/document.xml", &body("")), ("word/media/big.bin", &big)]);
        assert_eq!(
            parse_within(Format::Docx, &archive, &SMALL).unwrap_err(),
            "the DOCX member word/media/big.bin declares 65.0 KiB uncompressed, over the limit of 64 KiB per member"
        );
        let part = vec![b' '; 50 * 1024];
        let archive = docx(&[("word/document.xml", &body("")), ("a.bin", &part), ("b.bin", &part), ("c.bin", &part)]);
        assert_eq!(
            parse_within(Format::Docx, &archive, &SMALL).unwrap_err(),
            "the DOCX declares more than 128 KiB uncompressed in all, over the limit"
        );
    }

    #[test]
    fn the_text_of_a_docx_is_capped() {
        let paragraphs = "<w:p><w:r><w:t>Lorem ipsum dolor sit amet.</w:t></w:r></w:p>".repeat(200);
        let archive = docx(&[("word/document.xml", &body(&paragraphs))]);
        assert_eq!(
            parse_within(Format::Docx, &archive, &SMALL).unwrap_err(),
            "the text of the document is longer than 4 KiB (the limit)"
        );
        assert!(parse(Format::Docx, &archive).is_ok(), "within the service's caps");
    }

    #[test]
    fn formats_come_from_the_extension() {
        assert_eq!(Format::from_file_name("Guide.PDF"), Some(Format::Pdf));
        assert_eq!(Format::from_file_name("notes.md"), Some(Format::Markdown));
        assert_eq!(Format::from_file_name("image.png"), None);
        assert_eq!(Format::from_file_name("no-extension"), None);
    }

    #[test]
    fn question_answer_csvs_give_entries_directly() {
        let parsed = parse(Format::Csv, b"Question,Answer\nDo you ship?,\"Yes, worldwide.\"\n,skipped\n").unwrap();
        assert_eq!(parsed.pairs, [QaPair { question: "Do you ship?".into(), answer: "Yes, worldwide.".into() }]);
    }

    #[test]
    fn other_csvs_give_a_section_per_row() {
        let parsed = parse(Format::Csv, b"product,price\nWidget,5 EUR\n").unwrap();
        assert_eq!(
            parsed.sections[0],
            Section { heading: Some("Widget".into()), text: "product: Widget\nprice: 5 EUR".into() }
        );
    }

    #[test]
    fn binary_or_empty_files_are_refused_with_a_reason() {
        assert_eq!(parse(Format::Text, &[0xff, 0xfe, 0x00]).unwrap_err(), "the file is not UTF-8 text");
        assert_eq!(parse(Format::Markdown, b"  \n\n").unwrap_err(), "the document contains no text");
        assert!(parse(Format::Docx, b"not a zip").unwrap_err().starts_with("the DOCX is not a valid archive"));
        assert!(parse(Format::Pdf, b"%PDF-1.4 garbage").is_err());
    }
}
