"""Floor 5, DLStudio's containers (their front is ``DLStudio/Transformers.py``): what each
container's settings are (``settings``), and the wiring that hands a container's model, data
and settings to the trainer and the evaluator (``wiring``), or a GPT's weights to a
translation model (``pretrained``). Nothing below this floor reads a container."""
