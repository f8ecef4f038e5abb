//! An artifact's media type, from its first bytes and its name: the content
//! decides for formats it identifies (a PNG named `.txt` is still a PNG), the
//! extension for text formats the content cannot tell apart (CSV, Markdown,
//! SVG), and valid UTF-8 without either is plain text.

/// Bytes read from the start of a file to sniff its format.
pub const SNIFF_BYTES: usize = 8192;

/// Sniffed types that only say what a format is built on.
const GENERIC_CONTAINERS: [&str; 3] = ["application/zip", "text/xml", "application/xml"];

/// The media type of a file named `filename` whose content starts with `head`.
pub fn media_type(filename: &str, head: &[u8]) -> String {
    let by_name = mime_guess::from_path(filename).first();
    if let Some(sniffed) = infer::get(head) {
        let sniffed = sniffed.mime_type();
        // Office documents and jars are zips inside, SVG and feeds are XML
        // inside (`<?xml ...?>` first): for these generic containers the name is more precise.
        if GENERIC_CONTAINERS.contains(&sniffed)
            && let Some(named) = &by_name
            && named.essence_str() != sniffed
        {
            return named.essence_str().to_owned();
        }
        return sniffed.to_owned();
    }
    match by_name {
        Some(named) if named.type_() == mime_guess::mime::TEXT => format!("{}; charset=utf-8", named.essence_str()),
        Some(named) => named.essence_str().to_owned(),
        None if looks_like_text(head) => "text/plain; charset=utf-8".to_owned(),
        None => "application/octet-stream".to_owned(),
    }
}

/// UTF-8 without NUL (a multi-byte character cut at the sniff boundary still counts).
fn looks_like_text(head: &[u8]) -> bool {
    if head.contains(&0) {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::media_type;

    #[test]
    fn content_first_then_name_then_text() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert_eq!(media_type("chart.png", png), "image/png");
        assert_eq!(media_type("chart.txt", png), "image/png", "content beats a wrong extension");
        assert_eq!(media_type("report.pdf", b"%PDF-1.7\n"), "application/pdf");
        assert_eq!(media_type("data.csv", b"a,b\n1,2\n"), "text/csv; charset=utf-8");
        assert_eq!(media_type("notes.md", b"# Title\n"), "text/markdown; charset=utf-8");
        assert_eq!(media_type("bars.svg", b"<svg xmlns='http://www.w3.org/2000/svg'></svg>"), "image/svg+xml");
        let matplotlib_svg = b"<?xml version=\"1.0\" encoding=\"utf-8\" standalone=\"no\"?>\n<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\"\n <svg";
        assert_eq!(media_type("chart.svg", matplotlib_svg), "image/svg+xml", "an XML declaration does not hide an SVG");
        assert_eq!(media_type("README", b"plain words"), "text/plain; charset=utf-8");
        assert_eq!(media_type("blob", b"\0\x01\x02"), "application/octet-stream");
    }
}
