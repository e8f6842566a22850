"""The report verbs write exactly the paths they are given (the rules name every output; nothing is derived)."""

from contract_files import write_clustering, write_param_counts

from pipeline.cli import main


def test_a_table_verb_writes_the_files_it_names(tmp_path):
    paths = {view: tmp_path / view / f"table-{view}.out" for view in ("md", "csv", "tex", "html")}
    args = [arg for view, path in paths.items() for arg in (f"--{view}", str(path))]
    assert main(["param-count-table", *args, str(write_param_counts(tmp_path))]) == 0
    assert all(path.stat().st_size > 0 for path in paths.values())
    assert "<table" in paths["html"].read_text() and "\\toprule" in paths["tex"].read_text()


def test_a_figure_verb_writes_the_files_it_names_and_counts_them(tmp_path, capsys):
    inputs = ["--inputs", *map(str, write_clustering(tmp_path))]
    png, pdf = [tmp_path / "a.png", tmp_path / "b.png"], [tmp_path / "pdf" / "a.pdf", tmp_path / "pdf" / "b.pdf"]
    assert main(["figure", "clustering", "--png", *map(str, png), "--pdf", *map(str, pdf), *inputs]) == 0
    assert all(path.stat().st_size > 0 for path in png + pdf)
    assert main(["figure", "clustering", "--png", str(png[0]), "--pdf", str(pdf[0]), *inputs]) == 1
    assert "--png and --pdf name 1 and 1 files; expected 2 each" in capsys.readouterr().err
