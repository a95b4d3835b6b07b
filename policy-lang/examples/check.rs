//! `cargo run -p policy-lang --example check -- FILE.vcl`: print diagnostics.
use std::path::Path;

struct Fs;
impl policy_lang::SourceLoader for Fs {
    fn load(&self, path: &str, from: Option<&str>) -> Result<(String, String), String> {
        let p = match from.and_then(|f| Path::new(f).parent()) {
            Some(dir) if !Path::new(path).is_absolute() => dir.join(path),
            _ => Path::new(path).to_path_buf(),
        };
        let text = std::fs::read_to_string(&p).map_err(|e| e.to_string())?;
        Ok((p.display().to_string(), text))
    }
}

fn main() {
    let mut code = 0;
    for f in std::env::args().skip(1) {
        match policy_lang::load(&f, &Fs) {
            Ok(p) => {
                if let Some(w) = p.warnings() {
                    print!("{}", w.render());
                }
                println!("{f}: ok");
            }
            Err(d) => {
                print!("{}", d.render());
                code = 1;
            }
        }
    }
    std::process::exit(code);
}
