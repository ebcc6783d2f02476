//! Uploaded documents into text sections. Formats are known by the file's extension; a file
//! that is not what its extension says, or holds no text, is refused with the reason.

use std::io::{Cursor, Read};

use super::html::{self, Section};
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
    let parsed = match format {
        Format::Text => Parsed { sections: qa::plain_text_sections(utf8(bytes)?), ..Parsed::default() },
        Format::Markdown => Parsed { sections: qa::markdown_sections(utf8(bytes)?), ..Parsed::default() },
        Format::Html => {
            let page = html::extract(utf8(bytes)?);
            Parsed { title: page.title, sections: page.sections, pairs: Vec::new() }
        }
        Format::Csv => parse_csv(bytes)?,
        Format::Pdf => parse_pdf(bytes)?,
        Format::Docx => parse_docx(bytes)?,
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

/// One section per page, so that entries say where they come from.
fn parse_pdf(bytes: &[u8]) -> Result<Parsed, String> {
    let pages =
        pdf_extract::extract_text_from_mem_by_pages(bytes).map_err(|e| format!("the PDF cannot be read: {e}"))?;
    let sections = pages
        .into_iter()
        .enumerate()
        .map(|(index, text)| {
            let text = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n");
            Section { heading: Some(format!("Page {}", index + 1)), text }
        })
        .filter(|section| !section.text.is_empty())
        .collect();
    Ok(Parsed { sections, ..Parsed::default() })
}

/// `word/document.xml`: paragraphs in `Heading…` or `Title` styles open sections.
fn parse_docx(bytes: &[u8]) -> Result<Parsed, String> {
    use quick_xml::events::Event;

    let mut archive =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| format!("the DOCX is not a valid archive: {e}"))?;
    let mut xml = String::new();
    archive
        .by_name("word/document.xml")
        .map_err(|_| "the DOCX has no word/document.xml".to_owned())?
        .read_to_string(&mut xml)
        .map_err(|e| format!("the DOCX body cannot be read: {e}"))?;
    let mut reader = quick_xml::Reader::from_str(&xml);
    let mut sections: Vec<Section> = Vec::new();
    let mut current = Section { heading: None, text: String::new() };
    let mut paragraph = String::new();
    let mut heading_style = false;
    let mut in_text = false;
    loop {
        match reader.read_event().map_err(|e| format!("the DOCX body is not valid XML: {e}"))? {
            Event::Start(element) | Event::Empty(element) => match element.name().as_ref() {
                b"w:p" => {
                    paragraph.clear();
                    heading_style = false;
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
                b"w:tab" => paragraph.push(' '),
                b"w:br" => paragraph.push('\n'),
                _ => {}
            },
            Event::Text(text) if in_text => {
                paragraph.push_str(&text.decode().map_err(|e| format!("the DOCX text cannot be decoded: {e}"))?);
            }
            Event::End(element) => match element.name().as_ref() {
                b"w:t" => in_text = false,
                b"w:p" => {
                    let text = paragraph.trim().to_owned();
                    if text.is_empty() {
                        continue;
                    }
                    if heading_style {
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
    use super::*;

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
