"""Reports of benchmark runs: the aligned comparison in the terminal and one self-contained HTML file."""
