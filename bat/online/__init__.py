"""Online RL: GRPO steps that each roll out a fresh batch from the current weights (`bat.online.block`), the
shuffled-reward twin and signal counts (`bat.online.rewards`), and the learning check (`bat.online.learning_check`)."""
