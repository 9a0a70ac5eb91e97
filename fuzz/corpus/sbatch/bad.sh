#!/bin/sh
#SBATCH -J ok
#SBATCH --time=abc
