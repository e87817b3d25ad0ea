"""The command line: ``scriptorium`` (:mod:`.entry`), the parser and the core verbs (:mod:`.main`), and one
module per verb group — :mod:`.changes`, :mod:`.recall`, :mod:`.runtime`, :mod:`.cluster` — with
:mod:`.output` for what every verb prints and the exit codes."""
